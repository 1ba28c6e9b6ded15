"""A producer as a business service would write one, with boto3: sends every message body read
from stdin (a JSON list of strings) to the SQS queue at argv[1], ten to a SendMessageBatch, and
fails loudly if SQS refuses any. The endpoint comes from AWS_ENDPOINT_URL_SQS (moto_server)."""

import json
import os
import sys

import boto3


def main() -> None:
    url = sys.argv[1]
    bodies = json.load(sys.stdin)
    sqs = boto3.client("sqs", region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    for start in range(0, len(bodies), 10):
        entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies[start : start + 10])]
        answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        if answer.get("Failed"):
            sys.exit(f"SQS refused: {answer['Failed']}")
    print(len(bodies))


if __name__ == "__main__":
    main()
