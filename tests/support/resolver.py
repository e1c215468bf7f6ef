"""A Twisted name resolver for tests: never touches real DNS.

* ``localhost`` and any name ending in ``.test`` resolve to 127.0.0.1,
* except names starting with ``nxdomain`` (``nxdomain-abc.test``), which fail like a
  DNS miss (the resolution completes with no address, so Scrapy raises
  ``DNSLookupError``),
* IP literals resolve to themselves,
* every other name fails the same way.

Use it directly (``reactor.installNameResolver(LocalResolver(reactor))``; the test
conftest does this once per session) or as a Scrapy setting for ``scrapy crawl``
subprocesses: ``TWISTED_DNS_RESOLVER = RESOLVER_SETTING`` (with the repository root on
``PYTHONPATH``; the setting is ``DNS_RESOLVER`` before Scrapy 2.19, see
``tests.support.scrapy_compat.RESOLVER_SETTING_NAME``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import (
    IAddress,
    IHostnameResolver,
    IHostResolution,
    IResolutionReceiver,
)
from zope.interface import implementer

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

#: Value for the DNS resolver setting in ``scrapy`` subprocesses (the setting's name is
#: ``tests.support.scrapy_compat.RESOLVER_SETTING_NAME``).
RESOLVER_SETTING = "tests.support.resolver.LocalResolver"

LOOPBACK = "127.0.0.1"
FAIL_PREFIX = "nxdomain"
TEST_SUFFIX = ".test"


def resolve_name(name: str) -> str | None:
    """The address a test name resolves to, or None for a lookup failure."""
    host = name.lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        pass
    if host.startswith(FAIL_PREFIX):
        return None
    if host == "localhost" or host.endswith(TEST_SUFFIX):
        return LOOPBACK
    return None


@implementer(IHostResolution)
class _Resolution:
    def __init__(self, name: str) -> None:
        self.name = name
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


@implementer(IHostnameResolver)
class LocalResolver:
    """IHostnameResolver for ``.test`` names; see the module docstring.

    ``lookups`` (class attribute, shared) lists every name asked for, in order, so a
    test can check that nothing tried to reach an outside name.
    """

    lookups: list[str] = []  # noqa: RUF012 - deliberately shared by all instances

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    # -- Scrapy (TWISTED_)DNS_RESOLVER interface ---------------------------------

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: Any) -> LocalResolver:
        return cls(reactor)

    def install_on_reactor(self) -> None:
        self.reactor.installNameResolver(self)

    # -- IHostnameResolver -------------------------------------------------------

    def resolveHostName(
        self,
        resolutionReceiver: IResolutionReceiver,
        hostName: str,
        portNumber: int = 0,
        addressTypes: Sequence[type[IAddress]] | None = None,
        transportSemantics: str = "TCP",
    ) -> IHostResolution:
        LocalResolver.lookups.append(hostName)
        resolution = _Resolution(hostName)
        resolutionReceiver.resolutionBegan(resolution)
        address = resolve_name(hostName)
        # Deliver the answer on a later reactor turn, as a real resolver would.
        self.reactor.callLater(
            0, self._finish, resolutionReceiver, resolution, address, portNumber, addressTypes
        )
        return resolution

    @staticmethod
    def _finish(
        receiver: IResolutionReceiver,
        resolution: _Resolution,
        address: str | None,
        port: int,
        address_types: Sequence[type[IAddress]] | None,
    ) -> None:
        if address is not None and not resolution.cancelled:
            addr: IAddress
            if ipaddress.ip_address(address).version == 6:
                addr = IPv6Address("TCP", address, port)
            else:
                addr = IPv4Address("TCP", address, port)
            if address_types is None or type(addr) in address_types:
                receiver.addressResolved(addr)
        receiver.resolutionComplete()
