"""autoresearch: the keep-or-revert research loop, logged to git and MLflow."""

__version__ = "0.1.0"
