"""Every prompt of the project lives here, as plain strings with ``str.format`` fields."""
