"""What differs between the Scrapy versions the suite runs on (2.14 .. 2.19).

The one place the tests ask which Scrapy is installed (by what it provides, not by its
version number); CI runs the suite on the newest Scrapy and on the oldest one
``pyproject.toml`` allows (2.14.2).

* ``RESOLVER_SETTING_NAME``: the setting that names the Twisted DNS resolver class,
  ``TWISTED_DNS_RESOLVER`` since Scrapy 2.19, ``DNS_RESOLVER`` before (same interface:
  ``from_crawler(crawler, reactor)`` then ``install_on_reactor()``).
* ``HAS_DOWNLOAD_EXCEPTIONS``: whether Scrapy raises its own download exceptions
  (``CannotResolveHostError``, ``DownloadTimeoutError``, ... in ``scrapy.exceptions``,
  new in 2.19) rather than Twisted's (``DNSLookupError``, ``TimeoutError``, ...).
* The exception a failed download reaches the errback as, Scrapy's own since 2.19
  (which keeps Twisted's as ``__cause__`` where there is one), Twisted's before:

  ======================= ========================== ===========================
  name                    Scrapy 2.19                Scrapy 2.14
  ======================= ========================== ===========================
  ``DNS_FAILURE``         ``CannotResolveHostError`` ``DNSLookupError``
  ``DATA_LOSS_FAILURE``   ``ResponseDataLossError``  ``ResponseFailed``
  ``NO_RESPONSE_FAILURE`` ``DownloadFailedError``    ``ResponseNeverReceived``
  ``TIMEOUT_FAILURE``     ``DownloadTimeoutError``   ``TimeoutError`` (Twisted's)
  ======================= ========================== ===========================

* ``HAS_DELAY_JITTER``: whether download slots have a numeric ``jitter`` (Scrapy 2.19:
  ``DOWNLOAD_DELAY_JITTER``, ``Slot.jitter``) rather than the on/off ±50 %
  ``RANDOMIZE_DOWNLOAD_DELAY`` / ``Slot.randomize_delay`` of earlier versions.
* ``NO_DELAY_JITTER``: the settings that make every slot keep its delay exactly.

Download errors are also slower before Scrapy 2.19: the downloader and its middleware
manager each sleep 0.1 s before passing an exception on, so every failed download
takes 0.2 s longer (a refused connection about 0.5 s instead of 0.3 s).
"""

from __future__ import annotations

import scrapy
import scrapy.exceptions
from scrapy.settings import default_settings
from twisted.internet.error import DNSLookupError
from twisted.internet.error import TimeoutError as TwistedTimeoutError
from twisted.web.client import ResponseFailed, ResponseNeverReceived

RESOLVER_SETTING_NAME = (
    "TWISTED_DNS_RESOLVER" if hasattr(default_settings, "TWISTED_DNS_RESOLVER") else "DNS_RESOLVER"
)

HAS_DOWNLOAD_EXCEPTIONS = hasattr(scrapy.exceptions, "CannotResolveHostError")

DNS_FAILURE: type[Exception] = getattr(scrapy.exceptions, "CannotResolveHostError", DNSLookupError)
DATA_LOSS_FAILURE: type[Exception] = getattr(
    scrapy.exceptions, "ResponseDataLossError", ResponseFailed
)
NO_RESPONSE_FAILURE: type[Exception] = getattr(
    scrapy.exceptions, "DownloadFailedError", ResponseNeverReceived
)
TIMEOUT_FAILURE: type[Exception] = getattr(
    scrapy.exceptions, "DownloadTimeoutError", TwistedTimeoutError
)

HAS_DELAY_JITTER = hasattr(default_settings, "DOWNLOAD_DELAY_JITTER")

NO_DELAY_JITTER: dict[str, object] = (
    {"DOWNLOAD_DELAY_JITTER": 0} if HAS_DELAY_JITTER else {"RANDOMIZE_DOWNLOAD_DELAY": False}
)
