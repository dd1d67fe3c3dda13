"""Drives a warden agent through Debian's python3-consul2 (the `consul` package), unmodified.

Run by test/compat/python-consul.test.ts with /usr/bin/python3. It reads its inputs as one JSON object on stdin
(never argv, so no secret reaches the process list): host, port, the management token, and for login a PEM public
key and a JWT signed with its private key. Every step goes through the library's own classes
(consul.Consul(host=..., port=..., token=...) and its ACL, Config, Catalog, Status and Operator endpoints); each
step's values are printed as one JSON object on stdout, and the TypeScript test asserts on them.

Where this version of the library lacks an endpoint or a parameter, the step is left out with a comment saying so;
no raw HTTP call stands in for the library. The blocking query is the one place that reaches below the endpoint
classes: the library's ACL and Config methods take no index, so it uses the library's own transport and callback
(Consul.http.get with CB.json(index=True), which reads X-Consul-Index), exactly as the library's blocking-capable
methods (catalog.nodes, kv.get, ...) are built.
"""

import json
import sys
import threading
import time

import consul
from consul.base import ACLPermissionDenied, CB

inputs = json.load(sys.stdin)
HOST = inputs["host"]
PORT = inputs["port"]
MANAGEMENT = inputs["token"]
SUFFIX = inputs["suffix"]

c = consul.Consul(host=HOST, port=PORT, token=MANAGEMENT, timeout=30)
results = {}


def named(prefix):
    return "%s-%s" % (prefix, SUFFIX)


# --- Status, catalog and operator: what the library offers of them that warden serves.
results["status"] = {"leader": c.status.leader(), "peers": c.status.peers()}
results["datacenters"] = c.catalog.datacenters()
results["raft_configuration"] = c.operator.raft.configuration()

# --- Tokens: self first (the management token itself).
results["self"] = c.acl.tokens.self()

# --- Policies: create, read by ID and by name, update, list.
policy = c.acl.policy.create(named("py-policy"), description="made by python-consul", rules='service_prefix "" { policy = "read" }')
results["policy_create"] = policy
results["policy_get"] = c.acl.policy.get(policy["ID"])
results["policy_get_by_name"] = c.acl.policy.get(name=named("py-policy"))
results["policy_update"] = c.acl.policy.update(policy["ID"], named("py-policy"), description="updated by python-consul", rules='service_prefix "" { policy = "write" }')
results["policy_list_names"] = sorted(entry["Name"] for entry in c.acl.policy.list())

# --- Roles: create, read by ID and by name, update, list. roles.list(policy=...) is left out: this library version
# puts "?policy=" into the path it then percent-encodes (base.py Roles.list), so the filter never reaches a server as a
# query parameter.
role = c.acl.roles.create({"Name": named("py-role"), "Description": "role from python", "Policies": [{"ID": policy["ID"]}]})
results["role_create"] = role
results["role_get"] = c.acl.roles.get(role["ID"])
results["role_get_by_name"] = c.acl.roles.get_by_name(named("py-role"))
results["role_update"] = c.acl.roles.update({"Name": named("py-role"), "Description": "role updated", "Policies": [{"Name": named("py-policy")}]}, role["ID"])
results["role_list_names"] = sorted(entry["Name"] for entry in c.acl.roles.list())

# --- Tokens: create, read, update, clone, list (whole and filtered), delete, read after delete.
token = c.acl.tokens.create({"Description": "token from python", "Policies": [{"ID": policy["ID"]}], "Roles": [{"Name": named("py-role")}]})
results["token_create"] = token
results["token_get"] = c.acl.tokens.get(token["AccessorID"])
results["token_self_as_itself"] = c.acl.tokens.self(token=token["SecretID"])
results["token_update"] = c.acl.tokens.update({"Description": "token updated", "Policies": [{"Name": named("py-policy")}]}, token["AccessorID"])
clone = c.acl.tokens.clone(description="cloned by python", accessor_id=token["AccessorID"])
results["token_clone"] = clone
listed = c.acl.tokens.list()
results["token_list_accessors"] = [entry["AccessorID"] for entry in listed]
results["token_list_by_policy"] = sorted(entry["AccessorID"] for entry in c.acl.tokens.list(policy=policy["ID"]))
results["token_delete"] = c.acl.tokens.delete(clone["AccessorID"])
# On a 404 the library answers (X-Consul-Index of the response, None) instead of raising.
results["token_get_deleted"] = c.acl.tokens.get(clone["AccessorID"])

# --- Auth methods: create, read, update, list.
method_name = named("py-jwt")
method_config = {"JWTValidationPubKeys": [inputs["publicKey"]], "BoundAudiences": ["warden"], "ClaimMappings": {"sub": "name"}}
results["auth_method_create"] = c.acl.auth_method.create({"Name": method_name, "Type": "jwt", "Config": method_config})
results["auth_method_get"] = c.acl.auth_method.get(method_name)
results["auth_method_update"] = c.acl.auth_method.update({"Name": method_name, "Type": "jwt", "Description": "updated by python", "Config": method_config}, method_name)
results["auth_method_list_names"] = sorted(entry["Name"] for entry in c.acl.auth_method.list())

# --- Binding rules: create, read, update, list. (This library's list takes no authmethod filter.)
rule = c.acl.binding_rule.create({"AuthMethod": method_name, "BindType": "service", "BindName": "svc-${value.name}", "Selector": 'value.name == "nobody"'})
results["binding_rule_create"] = rule
results["binding_rule_get"] = c.acl.binding_rule.get(rule["ID"])
results["binding_rule_update"] = c.acl.binding_rule.update({"AuthMethod": method_name, "BindType": "service", "BindName": "svc-${value.name}", "Description": "any name"}, rule["ID"])
results["binding_rule_list_ids"] = [entry["ID"] for entry in c.acl.binding_rule.list()]

# --- Login and logout: login with the JWT, use the token, log out with it, and see it refused afterwards.
login = c.acl.login(method_name, inputs["jwt"], meta={"client": "python-consul"})
results["login"] = login
results["login_self"] = c.acl.tokens.self(token=login["SecretID"])
results["token_list_by_authmethod"] = [entry["AccessorID"] for entry in c.acl.tokens.list(authmethod=method_name)]
results["logout"] = c.acl.logout(token=login["SecretID"])
try:
    c.acl.tokens.self(token=login["SecretID"])
    results["self_after_logout"] = "accepted"
except ACLPermissionDenied as error:
    results["self_after_logout"] = "ACLPermissionDenied: %s" % error

# --- ACL replication status.
results["replication"] = c.acl.replication()

# --- Config entries: write, read, list, a conditional write with a stale index, delete, read after delete.
# (config.put sends cas only when it is non-zero, so the "create only if absent" form cas=0 cannot be expressed.)
entry = {"Kind": "service-defaults", "Name": named("py-web"), "Protocol": "http"}
results["config_put"] = c.config.put(entry)
results["config_get"] = c.config.get("service-defaults", named("py-web"))
results["config_put_stale_cas"] = c.config.put(dict(entry, Protocol="grpc"), cas=results["config_get"]["ModifyIndex"] + 1000)
results["config_put_cas"] = c.config.put(dict(entry, Protocol="grpc"), cas=results["config_get"]["ModifyIndex"])
results["config_list_names"] = sorted(item["Name"] for item in c.config.list("service-defaults"))
results["config_after_cas"] = c.config.get("service-defaults", named("py-web"))
results["config_delete"] = c.config.delete("service-defaults", named("py-web"))
results["config_get_deleted"] = c.config.get("service-defaults", named("py-web"))

# --- A blocking query on the index X-Consul-Index gave: once with nothing changing (it waits out `wait`), once woken
# by a policy another client creates meanwhile.
headers = {"X-Consul-Token": MANAGEMENT}
index, policies = c.http.get(CB.json(index=True), path="/v1/acl/policies", headers=headers)
started = time.monotonic()
same_index, _ = c.http.get(CB.json(index=True), path="/v1/acl/policies", params=[("index", index), ("wait", "1s")], headers=headers)
results["blocking_timeout"] = {"index": index, "returned_index": same_index, "seconds": time.monotonic() - started}

writer = consul.Consul(host=HOST, port=PORT, token=MANAGEMENT, timeout=30)
woken_name = named("py-wakes")
timer = threading.Timer(0.5, lambda: writer.acl.policy.create(woken_name))
started = time.monotonic()
timer.start()
try:
    new_index, woken = c.http.get(CB.json(index=True), path="/v1/acl/policies", params=[("index", index), ("wait", "20s")], headers=headers)
finally:
    timer.join()
results["blocking_woken"] = {
    "index": index,
    "returned_index": new_index,
    "seconds": time.monotonic() - started,
    "names": sorted(entry["Name"] for entry in woken),
    "expected_name": woken_name,
}

# --- Clean up what the run made, through the library, and report what the deletes answered.
results["cleanup"] = {
    "token": c.acl.tokens.delete(token["AccessorID"]),
    "binding_rule": c.acl.binding_rule.delete(rule["ID"]),
    "auth_method": c.acl.auth_method.delete(method_name),
    "role": c.acl.roles.delete(role["ID"]),
    "policy": c.acl.policy.delete(policy["ID"]),
}

json.dump(results, sys.stdout)
