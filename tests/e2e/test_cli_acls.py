"""End-to-end: `weir acls` (kafka-acls.sh's options) guards a topic on a real `weir serve`
with Kafka's StandardAuthorizer keys: a DENY added by the CLI refuses a produce, `--list`
shows it as kafka-acls.sh prints it, and `--remove` lets the produce through again."""

from __future__ import annotations

import json

import pytest

from conftest import own_broker, run_weir

AUTHORIZER = ("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
              "allow.everyone.if.no.acl.found=true\n")


weir = run_weir


@pytest.fixture
def secured(request, tmp_path):
    return own_broker(request, tmp_path, AUTHORIZER, "needs its own broker with an authorizer")


def test_acls_added_listed_and_removed_by_the_cli(secured):
    binary, bootstrap = secured.binary, secured.bootstrap
    server = ["--bootstrap-server", bootstrap]
    weir(binary, "topics", "--bootstrap", bootstrap, "create", "guarded")
    produce = ["produce", "--bootstrap", bootstrap, "guarded"]
    assert "produced 1 records" in weir(binary, *produce, stdin="before\n").stdout

    added = weir(binary, "acls", *server, "--add", "--deny-principal", "User:ANONYMOUS",
                 "--operation", "Write", "--topic", "guarded").stdout
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=guarded, " \
           "patternType=LITERAL)`" in added, added
    refused = weir(binary, *produce, stdin="denied\n", ok=False)
    assert refused.returncode != 0 and "uthorization" in refused.stderr, refused

    listed = weir(binary, "acls", *server, "--list", "--topic", "guarded").stdout
    assert "(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=DENY)" in listed
    as_json = json.loads(weir(binary, "--output", "json", "acls", *server, "--list").stdout)
    assert [(a["principal"], a["operation"], a["permission"]) for a in as_json] == \
        [("User:ANONYMOUS", "WRITE", "DENY")], as_json

    removed = weir(binary, "acls", *server, "--remove", "--topic", "guarded", "--force").stdout
    assert "operation=WRITE, permissionType=DENY" in removed, removed
    assert weir(binary, "acls", *server, "--list").stdout.strip() == ""
    assert "produced 1 records" in weir(binary, *produce, stdin="after\n").stdout
