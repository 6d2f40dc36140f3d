"""Settings, errors, logging, metrics, Redis helpers, the domain model and access: what every layer uses."""
