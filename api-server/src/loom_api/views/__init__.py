"""Flask blueprints: thin views that parse HTTP and call the service layer."""
