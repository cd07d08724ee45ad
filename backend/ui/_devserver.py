"""Runs the JobManager with the dashboard installed, until ``create_app`` calls
``install_ui`` itself. Same settings (environment) as ``millstream jobmanager``."""
from __future__ import annotations

import logging

import uvicorn

from backend.app import create_app
from backend.settings import Settings
from backend.ui import install_ui


def main() -> None:
    settings = Settings()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = create_app(settings)
    install_ui(app)  # idempotent: harmless once create_app does it too
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info")


if __name__ == "__main__":
    main()
