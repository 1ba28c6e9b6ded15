#!/usr/bin/env python3
"""Creates the season table on a local DynamoDB endpoint (moto_server, DynamoDB Local) with the
key schema infra/template.yaml declares for `ArchiveTable`, unless it exists.

    local_table.py ENDPOINT TABLE_NAME

Used by scripts/run-local.sh. Credentials and region come from the environment (any values do
locally).
"""
import sys

import boto3
import yaml


class CloudFormationLoader(yaml.SafeLoader):
    """Reads CloudFormation's short tags (`!Ref`, `!Sub`, …) as plain values: the table's
    properties use none, the rest of the template is skipped."""


CloudFormationLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def main(endpoint: str, name: str) -> None:
    with open("infra/template.yaml", encoding="utf-8") as template:
        resources = yaml.load(template, Loader=CloudFormationLoader)["Resources"]
    properties = resources["ArchiveTable"]["Properties"]
    client = boto3.client("dynamodb", endpoint_url=endpoint)
    if name in client.list_tables()["TableNames"]:
        return
    client.create_table(
        TableName=name,
        BillingMode=properties["BillingMode"],
        AttributeDefinitions=properties["AttributeDefinitions"],
        KeySchema=properties["KeySchema"],
        GlobalSecondaryIndexes=properties["GlobalSecondaryIndexes"],
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
