#!/usr/bin/env python3
"""Prints, one per line, "valid" or "invalid" for each document of a JSON
list, as the JSON Schema validator (python3-jsonschema, draft 2020-12) sees
it against the given schema. Used by cluster_schema_test.cc to hold the C++
cluster-spec checker to schemas/cluster.schema.json with an independent
validator. Exit 77 (skip) when jsonschema is not installed."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("python3 jsonschema is not installed", file=sys.stderr)
    sys.exit(77)

schema_path, docs_path = sys.argv[1], sys.argv[2]
with open(schema_path) as f:
    schema = json.load(f)
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
with open(docs_path) as f:
    for doc in json.load(f):
        print("valid" if validator.is_valid(doc) else "invalid")
