"""Spiders: ``idseq`` (generic) and ``demo`` (an example site subclass)."""
