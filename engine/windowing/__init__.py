"""Windowing logic: windows, assigners, triggers and evictors. Pure; shared by the
native window operator and the Spark runner."""
