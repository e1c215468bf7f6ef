"""The scrapy-rep demo project. See ../run_demo.py."""
