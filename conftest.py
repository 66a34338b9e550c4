"""Root pytest configuration: load the plugin with the fixtures for real daemons."""

pytest_plugins = ["loom_common.testing"]
