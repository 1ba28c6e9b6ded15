"""The local stand-in of the template's notification bus (docs/notifications.md): creates the
EventBridge bus named by argv[1] on moto_server (AWS_ENDPOINT_URL_EVENTBRIDGE), a queue, and the
example rule delivering every `Standings Rank Changed` event to it; prints the queue's URL.
Idempotent: a second run reuses what exists."""

import json
import os
import sys

import boto3


def main() -> None:
    bus = sys.argv[1]
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    events, sqs = boto3.client("events", region_name=region), boto3.client("sqs", region_name=region)
    if bus not in [b["Name"] for b in events.list_event_buses()["EventBuses"]]:
        events.create_event_bus(Name=bus)
    url = sqs.create_queue(QueueName=f"{bus}-rank-changed")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    pattern = {"source": ["standings"], "detail-type": ["Standings Rank Changed"]}
    events.put_rule(Name="rank-changed-to-queue", EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(Rule="rank-changed-to-queue", EventBusName=bus, Targets=[{"Id": "queue", "Arn": arn}])
    print(url)


if __name__ == "__main__":
    main()
