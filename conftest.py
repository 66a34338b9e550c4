"""Root pytest configuration: load the plugin with the fixtures for real daemons.

`pytester` runs pytest inside tests (the plugin's own tests use it).
"""

pytest_plugins = ["loom_common.testing", "pytester"]
