"""Durable history in SQL: SQLAlchemy models, engine setup, Alembic upgrades and
the repositories (jobs, exceptions, uploaded programs, TaskManagers) built on them."""
