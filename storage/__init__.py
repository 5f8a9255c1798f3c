"""SQLAlchemy persistence for the queue manager."""
