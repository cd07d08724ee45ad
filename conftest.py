"""Root conftest: its presence puts the repository root on ``sys.path``, so tests
import ``engine`` and ``backend`` without the project being pip-installed."""
