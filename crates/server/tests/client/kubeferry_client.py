#!/usr/bin/env python3
"""A kubeferry client in Python's standard library only, driven by the service's OpenAPI
document: operations are found by their operationId, so the client follows the document
rather than hard-coding paths.

    python3 kubeferry_client.py http://127.0.0.1:8080 TOKEN

submits a job, waits for it through the job's event stream and prints its final status and
log as one JSON object.
"""

import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request


class ApiError(Exception):
    """An error answer of the service: its HTTP status and its JSON body."""

    def __init__(self, status, body):
        super().__init__(f"{status} {body.get('code')}: {body.get('message')}")
        self.status = status
        self.body = body


class Client:
    """Calls the operations of a kubeferry service by operationId."""

    def __init__(self, base, token=None):
        self.base = base.rstrip("/")
        self.token = token
        document = self._request("GET", "/openapi.json")
        self.operations = {}
        for path, item in document["paths"].items():
            for method, operation in item.items():
                self.operations[operation["operationId"]] = (method.upper(), path)

    def _request(self, method, path, body=None, accept="application/json"):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Accept", accept)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", "Bearer " + self.token)
        try:
            response = urllib.request.urlopen(request, timeout=60)
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, json.loads(error.read() or b"{}")) from None
        if accept == "text/event-stream":
            return response
        return json.loads(response.read())

    def _path(self, operation_id, params, query):
        method, template = self.operations[operation_id]
        path = re.sub(
            r"\{(\w+)\}",
            lambda m: urllib.parse.quote(str(params[m.group(1)]), safe=""),
            template,
        )
        if query:
            path += "?" + urllib.parse.urlencode(query)
        return method, path

    def call(self, operation_id, params=None, query=None, body=None):
        """Calls an operation; returns its JSON answer or raises ApiError."""
        method, path = self._path(operation_id, params or {}, query)
        return self._request(method, path, body)

    def events(self, operation_id, params=None, query=None):
        """Yields (event, data) from a Server-Sent Events operation until the stream ends."""
        method, path = self._path(operation_id, params or {}, query)
        response = self._request(method, path, accept="text/event-stream")
        event, data = "message", []
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line == "":
                if data:
                    yield event, json.loads("\n".join(data))
                event, data = "message", []
            elif line.startswith("event:"):
                event = line[len("event:"):].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:"):].lstrip())


def id_params(execution_id):
    """The path parameters of an execution id <cluster>/<kind>/<namespace>/<name>."""
    cluster, kind, namespace, name = execution_id.split("/")
    return {"cluster": cluster, "kind": kind, "namespace": namespace, "name": name}


def main():
    base, token = sys.argv[1], sys.argv[2]
    client = Client(base, token)
    submitted = client.call(
        "submitJob",
        body={
            "jobId": "python-client-1",
            "spec": {
                "name": "from-python",
                "image": "busybox:1.36",
                "command": ["sh", "-c"],
                "args": ["echo hello from {{who}}; echo bye"],
            },
            "params": {"who": "python"},
        },
    )
    params = id_params(submitted["id"])
    states = []
    final = None
    for event, data in client.events("watchJob", params=params):
        if event == "status":
            states.append(data["state"])
            final = data
    log = client.call("getJobLogs", params=params, query={"lines": 10})
    try:
        client.call("getJob", params={**params, "cluster": "elsewhere"})
        wrong_cluster = None
    except ApiError as error:
        wrong_cluster = error.body["code"]
    print(json.dumps({
        "id": submitted["id"],
        "states": states,
        "final": final,
        "log": log["log"],
        "wrongCluster": wrong_cluster,
    }))


if __name__ == "__main__":
    main()
