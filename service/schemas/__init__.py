"""The API's request and response models, one module per resource (the maintenance run reports too); import
each from its module. Domain rules are in service/core/domain.py."""
