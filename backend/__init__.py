"""Millstream's control plane: the FastAPI Dispatcher, REST, dashboard, persistence and CLI."""
