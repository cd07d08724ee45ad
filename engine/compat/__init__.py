"""Compatibility with PyFlink programs: ``pyflink.*`` imports resolve to Millstream's API."""
