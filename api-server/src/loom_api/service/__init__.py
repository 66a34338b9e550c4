"""The service layer: validation and config-DB changes for every resource. Imports no Flask.

`crud` holds the generic operations (list with filters and pagination, get, create, replace,
patch with ETags, delete with reference checks); each resource module declares one
`Resource`: its table, its request model, and the few rules only it has.
"""
