"""Root conftest: its presence puts the repository root on ``sys.path``, so tests import
each other (``tests.integration.cluster``). The packages themselves (``millstream.engine``,
``millstream.backend``) come from the editable install (``make install``), which maps the
repository's directories to those names."""
