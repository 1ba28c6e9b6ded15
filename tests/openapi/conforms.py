"""Checks recorded API answers against the OpenAPI document.

Usage: conforms.py OPENAPI.json SAMPLES.json, where SAMPLES is a list of
{"method", "path" (the document's path template), "status", "body"}. Every answer's status
must be documented for its operation, and its body must validate against the documented
JSON schema (JSON Schema 2020-12, the dialect of OpenAPI 3.1). Prints one line per problem
and exits 1 if there is any.
"""

import json
import sys

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

BASE = "urn:standings:openapi"


def pointer(*parts):
    return "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


def main(document_path, samples_path):
    with open(document_path) as f:
        document = json.load(f)
    with open(samples_path) as f:
        samples = json.load(f)
    registry = Registry().with_resource(BASE, Resource.from_contents(document, default_specification=DRAFT202012))
    problems = []
    for sample in samples:
        where = f"{sample['method'].upper()} {sample['path']} -> {sample['status']}"
        responses = document["paths"][sample["path"]][sample["method"]]["responses"]
        status = str(sample["status"])
        if status not in responses:
            problems.append(f"{where}: status not documented")
            continue
        response = pointer("paths", sample["path"], sample["method"], "responses", status)
        reference = responses[status].get("$ref")
        if reference:
            response = reference.lstrip("#/")
        schema = {"$ref": f"{BASE}#/{response}/content/{pointer('application/json')}/schema"}
        validator = Draft202012Validator(schema, registry=registry)
        for error in validator.iter_errors(sample["body"]):
            location = "/".join(str(p) for p in error.absolute_path)
            problems.append(f"{where}: at /{location}: {error.message}")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
