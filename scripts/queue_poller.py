"""The local stand-in for Lambda's SQS event source mapping (scripts/run-local.sh): creates the
event queue and its dead-letter queue on the local SQS endpoint (moto_server), then forever
receives batches of up to 10 messages, hands each batch to the `queue` function through the
Lambda Invoke API that `cargo lambda watch` serves (what `cargo lambda invoke queue` does), in
the shape Lambda sends, deletes what the function applied or dead-lettered, and leaves what it
handed back (`batchItemFailures`) for the queue's visibility timeout to redeliver.

  queue_poller.py create <base name>      prints the two queue URLs (event queue, dead letters)
  queue_poller.py poll <invoke base URL> <event queue URL>

A function error (the whole invocation failed) hands the whole batch back, as Lambda's event
source mapping does; it is never read as a batch with no failures.
"""

import json
import os
import sys
import time
import urllib.request

import boto3

VISIBILITY_SECS = 10  # short locally, so a take-back waiting for its give is redelivered soon


def create(name: str) -> None:
    sqs = boto3.client("sqs", region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    dead = sqs.create_queue(QueueName=f"{name}-dead-letters")["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": "10"})
    events = sqs.create_queue(
        QueueName=f"{name}-events", Attributes={"VisibilityTimeout": str(VISIBILITY_SECS), "RedrivePolicy": redrive}
    )["QueueUrl"]
    print(events, dead)


def record(message: dict, arn: str) -> dict:
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": boto3.session.Session().region_name or "us-east-1",
    }


def handed_back(function_error, answer, message_ids) -> set:
    """The messages of a batch SQS redelivers, from the Invoke API's answer: every one when the
    function failed (the `X-Amz-Function-Error` header, or an error object as the body, which is
    what Lambda's runtime answers for an unhandled error), else its `batchItemFailures`."""
    failed_whole = function_error or not isinstance(answer, dict) or "errorType" in answer or "errorMessage" in answer
    if failed_whole:
        return set(message_ids)
    return {f["itemIdentifier"] for f in answer.get("batchItemFailures") or []}


def poll(base: str, url: str) -> None:
    sqs = boto3.client("sqs", region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    invoke = f"{base}/2015-03-31/functions/queue/invocations"
    while True:
        batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["All"]).get("Messages", [])
        if not batch:
            continue
        payload = json.dumps({"Records": [record(m, arn) for m in batch]}).encode()
        try:
            with urllib.request.urlopen(urllib.request.Request(invoke, data=payload, method="POST"), timeout=60) as answer:
                failed = handed_back(answer.headers.get("X-Amz-Function-Error"), json.load(answer), [m["MessageId"] for m in batch])
        except Exception as error:  # the function is down: SQS would redeliver it all
            print(f"queue: invocation failed ({error}); the batch is redelivered", file=sys.stderr, flush=True)
            time.sleep(1)
            continue
        if len(failed) == len(batch):
            print(f"queue: the whole batch of {len(batch)} failed; it is redelivered", file=sys.stderr, flush=True)
        done = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch) if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(QueueUrl=url, Entries=done)
        print(f"queue: {len(batch)} message(s), {len(failed)} handed back", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["create"]:
        create(sys.argv[2])
    elif sys.argv[1:2] == ["poll"]:
        poll(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["handed-back"]:  # tests: <X-Amz-Function-Error or ""> <answer JSON> <message id>...
        print(" ".join(sorted(handed_back(sys.argv[2] or None, json.loads(sys.argv[3]), sys.argv[4:]))))
    else:
        sys.exit(__doc__)
