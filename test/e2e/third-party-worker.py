#!/usr/bin/env python3
"""A third-party svc worker, written from the documentation alone (docs/spec/interface.md,
docs/spec/decisions.md, README.md, man/, docs/design.md, fixtures/), in Python with the
standard library only: the way a customer integrating over HTTP would (svc-worker(1), A WORKER
OF YOUR OWN). test/e2e/third-party-worker.test.ts runs it.

Usage: third-party-worker.py REPO_DIR WORK_DIR   (NODE=path-to-node, default node)

Starts svcd from REPO_DIR/dist (kernel and gateway on port 0, the demo billing database, the
test tools), signs a bundle and pushes a policy, mints a remit and starts a run with the svc
CLI, then plays the worker over HTTP: leases, heartbeats, tool steps through the gateway's
/v1/tools/call, a retryable failure and its retry, an action that parks the run for approval
(approved with the CLI), completion, the event log and replay. Prints one JSON line per
check on standard output, the last one {"result": ...}; exits 0 when every check passed.
"""
import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
WORK = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "/tmp/sweep-thirdparty-tmp/run")
NODE = os.environ.get("NODE", "node")
SVC = [NODE, os.path.join(REPO, "dist/cli/index.js")]
SVCD = [NODE, os.path.join(REPO, "dist/daemon/main.js")]

checks = []   # (name, ok, detail)


def log(**kw):
    print(json.dumps(kw, default=str), flush=True)


def check(name, ok, detail=None):
    checks.append((name, bool(ok), detail))
    log(check=name, ok=bool(ok), detail=detail)


def http(method, url, body=None, headers=None, timeout=40):
    """Returns (status, parsed JSON or None, headers)."""
    data = None if body is None else json.dumps(body).encode()
    h = {"content-type": "application/json"} if body is not None else {}
    h.update(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None), dict(r.headers)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = {"_raw": raw.decode(errors="replace")}
        return e.code, parsed, dict(e.headers)


def svc(*args, env=None, check_rc=True):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(SVC + list(args), capture_output=True, text=True, env=e, timeout=60)
    if check_rc and p.returncode != 0:
        raise RuntimeError("svc %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return p


BUNDLE = """\
name: tp-refunds
version: 1.0.0
description: Third-party worker check
department: support
systems_of_record: [billing]
tools:
  billing.lookup_invoice: {writes: false}
  billing.refund: {writes: true}
  billing.void_refund: {writes: true}
  test.flaky: {writes: false}
workflows:
  refund:
    input_schema:
      type: object
      required: [invoice_id, amount, flaky_key]
      properties:
        invoice_id: {type: string}
        amount: {type: number}
        flaky_key: {type: string}
    steps:
      - id: lookup
        kind: tool
        tool: billing.lookup_invoice
        args: {invoice_id: "{{input.invoice_id}}"}
      - id: flaky
        kind: tool
        tool: test.flaky
        args: {key: "{{input.flaky_key}}", fail_times: 1}
        retry: {max_attempts: 3, initial_delay_ms: 100, max_delay_ms: 200}
      - id: refund
        kind: action
        tool: billing.refund
        args:
          invoice_id: "{{input.invoice_id}}"
          amount: "{{input.amount}}"
          reason: third-party worker
          ticket_id: TP-1
        compensate:
          tool: billing.void_refund
          args: {refund_id: "{{steps.refund.output.id}}"}
"""

POLICY = """\
require_approval large_refund by "role:finance"
  when action.tool == "billing.refund" && action.args.amount > 100
allow small_refund
  when action.tool == "billing.refund" && action.args.amount <= 100
"""


class Heartbeat(threading.Thread):
    def __init__(self, kernel, lease):
        super().__init__(daemon=True)
        self.kernel = kernel
        self.lease = lease
        self.stop = threading.Event()
        self.lost = False
        self.beats = 0

    def run(self):
        every = max(1, int(self.lease["heartbeat_seconds"]))
        while not self.stop.wait(every):
            st, body, _ = http("POST", "%s/v1/leases/%s/heartbeat" % (self.kernel, self.lease["lease_id"]))
            if st == 410:
                self.lost = True
                return
            self.beats += 1


def idem_key(*parts):
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


class Worker:
    def __init__(self, kernel, gateway, approve):
        self.kernel = kernel
        self.gateway = gateway
        self.approve = approve  # callback(approval_id)
        self.seen = []
        self.tokens = []

    def lease(self):
        st, body, _ = http("POST", self.kernel + "/v1/leases",
                           {"worker_id": "tp-worker-1", "kinds": ["tool", "action"],
                            "ttl_seconds": 6, "wait_seconds": 2})
        if st == 204:
            return None
        if st != 200:
            raise RuntimeError("lease: %s %s" % (st, body))
        return body

    def call_tool(self, lease, tool, args, key):
        ctx = lease["context"]
        return http("POST", self.gateway + "/v1/tools/call", {
            "remit_token": ctx["remit_token"], "run_id": lease["run_id"], "step": lease["step"],
            "lease_id": lease["lease_id"], "tool": tool, "args": args,
            "idempotency_key": key, "scope": None})

    def fail(self, lease, code, message, deterministic):
        return http("POST", "%s/v1/leases/%s/fail" % (self.kernel, lease["lease_id"]),
                    {"error": {"code": code, "message": message}, "deterministic": deterministic,
                     "usage": {"tokens": 0, "usd": 0}})

    def complete(self, lease, output):
        # svcd(8): usage is optional (a member it lacks counts 0).
        return http("POST", "%s/v1/leases/%s/complete" % (self.kernel, lease["lease_id"]), {"output": output})

    def handle(self, lease):
        sd = lease["step_def"]
        kind = lease.get("kind") or sd.get("kind")
        self.seen.append({"step": lease["step"], "attempt": lease["attempt"], "kind": kind,
                          "approved_actions": lease["context"].get("approved_actions")})
        self.tokens.append(lease["context"]["remit_token"])
        log(leased=lease["step"], attempt=lease["attempt"], kind=kind, step_def=sd,
            heartbeat_seconds=lease["heartbeat_seconds"], expires_at=lease["expires_at"],
            context_keys=sorted(lease["context"].keys()))
        hb = Heartbeat(self.kernel, lease)
        hb.start()
        try:
            if kind == "tool":
                key = idem_key(lease["run_id"], lease["step"], "tool")
                st, body, hdr = self.call_tool(lease, sd["tool"], sd.get("args") or {}, key)
                log(tool_call=sd["tool"], status=st, body=body)
                if st == 200:
                    return ("complete", self.complete(lease, body["result"]))
                code = (body or {}).get("error", {}).get("code") or \
                    (body or {}).get("refusal", {}).get("reason")
                deterministic = st in (403, 404, 409, 422)
                if not deterministic:
                    # svcd(8): deterministic absent is false and usage absent is 0.
                    return ("fail", http("POST", "%s/v1/leases/%s/fail" % (self.kernel, lease["lease_id"]),
                                         {"error": {"code": code or "gateway_error", "message": "status %d" % st}}))
                return ("fail", self.fail(lease, code or "gateway_error", "status %d" % st, deterministic))
            if kind == "action":
                action = {"tool": sd["tool"], "args": sd.get("args") or {},
                          "summary": "%s %s" % (sd["tool"], json.dumps(sd.get("args"), sort_keys=True))}
                st, dec, _ = http("POST", "%s/v1/leases/%s/actions" % (self.kernel, lease["lease_id"]),
                                  {"action": action})
                log(proposal=dec, status=st)
                if st == 403:
                    return ("fail", self.fail(lease, "action_denied", str(dec), True))
                if st != 200:
                    raise RuntimeError("actions: %s %s" % (st, dec))
                if dec["decision"] == "approval_required":
                    # The kernel parked the run and released the lease: stop at once.
                    st2, _, _ = http("POST", "%s/v1/leases/%s/heartbeat" % (self.kernel, lease["lease_id"]))
                    return ("parked", {"approval_id": dec["approval_id"], "action_id": dec["action_id"],
                                       "heartbeat_after_park": st2})
                key = idem_key(lease["run_id"], lease["step"], "action", dec["action_id"])
                st, body, _ = self.call_tool(lease, sd["tool"], action["args"], key)
                log(action_call=sd["tool"], status=st, body=body)
                if st == 200:
                    return ("complete", self.complete(lease, body["result"]),
                            dec)
                return ("fail", self.fail(lease, "tool_error", "status %d" % st, st in (403, 404, 409, 422)))
            return ("fail", self.fail(lease, "step_invalid", "kind %s not served" % kind, True))
        finally:
            hb.stop.set()


def main():
    os.makedirs(WORK, exist_ok=True)
    data = os.path.join(WORK, "svc-data")
    gwdir = os.path.join(WORK, "gw")
    os.makedirs(gwdir, exist_ok=True)
    subprocess.run([NODE, os.path.join(REPO, "dist/quickstart/billing-db.js"),
                    os.path.join(gwdir, "billing.db")], check=True, capture_output=True)
    with open(os.path.join(REPO, "fixtures/demo/gateway.yaml")) as f:
        gwconf = f.read()
    with open(os.path.join(gwdir, "gateway.yaml"), "w") as f:
        f.write(gwconf)
    keyfile = os.path.join(WORK, "publisher.json")
    if os.path.exists(keyfile):
        os.remove(keyfile)
    svc("keys", "gen", "-o", keyfile)
    publisher = svc("keys", "publisher", keyfile).stdout.strip()

    env = dict(os.environ, SVC_GATEWAY_TEST_TOOLS="1")
    env.pop("SVC_TOKEN", None)
    daemon = subprocess.Popen(SVCD + ["--data-dir", data, "--kernel-listen", "127.0.0.1:0",
                                      "--gateway-listen", "127.0.0.1:0",
                                      "--gateway-config", os.path.join(gwdir, "gateway.yaml"),
                                      "--publisher", publisher],
                              stdout=subprocess.PIPE, stderr=open(os.path.join(WORK, "svcd.log"), "w"),
                              env=env, text=True)
    try:
        line = daemon.stdout.readline()
        addrs = json.loads(line)
        kernel, gateway = addrs["kernel"], addrs["gateway"]
        log(svcd=addrs)
        cli_env = {"SVC_KERNEL_URL": kernel, "SVC_GATEWAY_URL": gateway}

        st, health, _ = http("GET", kernel + "/v1/health")
        check("kernel health", st == 200 and health.get("ok") is True, health)
        st, ghealth, _ = http("GET", gateway + "/v1/health")
        check("gateway health", st == 200 and ghealth.get("ok") is True, ghealth)

        # Bundle: signed with the CLI, posted over HTTP.
        bpath = os.path.join(WORK, "bundle.yaml")
        with open(bpath, "w") as f:
            f.write(BUNDLE)
        signed = os.path.join(WORK, "bundle.signed.json")
        svc("bundle", "sign", bpath, "--key", keyfile, "-o", signed, env=cli_env)
        with open(signed) as f:
            sb = json.load(f)
        st, b, _ = http("POST", kernel + "/v1/bundles", sb)
        check("bundle posted 201", st == 201 and b["bundle_id"].startswith("bnd_"), b)
        st2, b2, _ = http("POST", kernel + "/v1/bundles", sb)
        check("identical bundle re-post 200 same id", st2 == 200 and b2.get("bundle_id") == b["bundle_id"], b2)

        ppath = os.path.join(WORK, "tp.policy")
        with open(ppath, "w") as f:
            f.write(POLICY)
        svc("policy", "push", ppath, "--name", "tp", "--version", "1.0.0", env=cli_env)

        mint = svc("--json", "remit", "mint", "--tools", "billing.*,test.*",
                   "--scopes", "sql:table:*,test:*", "--autonomy", "supervised",
                   "--requested-by", "ana:support:support-lead", "--spend-usd", "5",
                   "--spend-tokens", "1000", "--policy-set", "tp@1.0.0", env=cli_env)
        remit = json.loads(mint.stdout)
        check("remit minted", remit["token"].startswith("krt1."), {"remit_id": remit["remit_id"]})
        parts = remit["token"].split(".")
        check("remit token has four parts (I 2.1)", len(parts) == 4, len(parts))

        st, keys, _ = http("GET", kernel + "/v1/keys")
        check("keys", st == 200 and keys["algorithm"] == "ed25519", keys)

        run_id = svc("run", "start", "tp-refunds", "refund", "--remit", remit["remit_id"],
                     "--input", json.dumps({"invoice_id": "inv_1003", "amount": 150,
                                            "flaky_key": "tp-%d" % time.time()}),
                     env=cli_env).stdout.strip()
        check("run started", run_id.startswith("run_"), run_id)
        t0 = time.time()
        st, _, _ = http("POST", kernel + "/v1/leases", {"worker_id": "tp-idle", "kinds": ["compensation"]})
        check("lease without wait_seconds answers at once (svcd(8): default 0)",
              st == 204 and time.time() - t0 < 3, {"status": st, "seconds": round(time.time() - t0, 2)})

        st, rr, _ = http("GET", "%s/v1/remits/%s" % (kernel, remit["remit_id"]))
        check("remit bound to run (D 3)", rr.get("run_id") == run_id and rr.get("run") == run_id, rr)

        def approve(approval_id):
            return svc("approvals", "approve", approval_id, "--actor", "fin-1:finance",
                       "--reason", "ok by third party", env=cli_env)

        w = Worker(kernel, gateway, approve)
        outcomes = []
        deadline = time.time() + 60
        parked_once = False
        while time.time() < deadline:
            st, run, _ = http("GET", "%s/v1/runs/%s" % (kernel, run_id))
            if run["state"] in ("completed", "failed", "abandoned"):
                break
            lease = w.lease()
            if lease is None:
                continue
            res = w.handle(lease)
            outcomes.append((lease["step"], lease["attempt"], res))
            log(outcome=res)
            if res[0] == "parked":
                parked_once = True
                st, run, _ = http("GET", "%s/v1/runs/%s" % (kernel, run_id))
                check("run parked for human after approval_required (I 3)",
                      run["state"] == "parked" and run.get("parked_reason") == "human", run["state"])
                check("lease released on park: heartbeat 410 (D 5.4)",
                      res[1]["heartbeat_after_park"] == 410, res[1]["heartbeat_after_park"])
                st, apl, _ = http("GET", kernel + "/v1/approvals?state=pending&approver=role:finance")
                ids = [a["approval_id"] for a in apl.get("approvals", [])]
                check("approval listed as pending", res[1]["approval_id"] in ids, ids)
                p = approve(res[1]["approval_id"])
                check("approved with CLI", p.returncode == 0, p.stdout.strip() + p.stderr.strip())

        # D §3 / svcd(8) REMITS: krt1.<key_id>.<payload>.<signature>, payload base64url (no
        # padding) of the JSON issued; the lease carries the run-bound token (payload plus run).
        def b64url_json(part):
            return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
        prefix, kid, payload, _sig = w.tokens[0].split(".")
        bound = b64url_json(payload)
        minted = b64url_json(remit["token"].split(".")[2])
        check("lease token: krt1, key id of GET /v1/keys, run-bound copy of the minted payload",
              prefix == "krt1" and kid == keys["key_id"] == bound["iss"] and bound.get("run") == run_id
              and "=" not in payload and {k: v for k, v in bound.items() if k != "run"} == minted
              and bound["rid"] == remit["remit_id"] and len(set(w.tokens)) == 1,
              {"bound": bound, "minted": minted})
        # Fail/retry observations
        flaky = [o for o in outcomes if o[0] == "flaky"]
        check("flaky step failed once then completed",
              len(flaky) >= 2 and flaky[0][2][0] == "fail" and flaky[0][2][1][1]["outcome"] == "retry_scheduled"
              and flaky[-1][2][0] == "complete", [(o[1], o[2][0], o[2][1][1]) for o in flaky])
        check("retry got attempt+1", len(flaky) >= 2 and flaky[1][1] == flaky[0][1] + 1,
              [o[1] for o in flaky])
        check("parked once", parked_once)
        refund = [o for o in outcomes if o[0] == "refund"]
        last = refund[-1][2] if refund else None
        check("approved proposal allowed with rule approved:<id> (I 3)",
              last and last[0] == "complete" and last[2]["decision"] == "allow"
              and last[2]["rule"].startswith("approved:apr_"), last and last[2])
        reapproved = [s for s in w.seen if s["step"] == "refund"]
        check("re-lease carries action id in approved_actions",
              len(reapproved) >= 2 and reapproved[-1]["approved_actions"]
              and any(isinstance(a, str) and a.startswith("act_") or
                      (isinstance(a, dict) and str(a.get("action_id", "")).startswith("act_"))
                      for a in reapproved[-1]["approved_actions"]),
              reapproved[-1]["approved_actions"] if reapproved else None)
        comp = [o for o in outcomes if o[2][0] == "complete"]
        check("last complete: run_state completed, next_step null",
              bool(comp) and comp[-1][2][1][1] == {"run_state": "completed", "next_step": None},
              comp[-1][2][1][1] if comp else None)

        st, run, _ = http("GET", "%s/v1/runs/%s" % (kernel, run_id))
        check("run completed", run["state"] == "completed", run["state"])
        check("run output is refund row", isinstance(run.get("output"), dict) and "id" in run["output"],
              run.get("output"))

        # Events, paged
        events = []
        seq = 1
        while True:
            st, page, _ = http("GET", "%s/v1/runs/%s/events?from_seq=%d&limit=7" % (kernel, run_id, seq))
            if not page["events"]:
                break
            events += page["events"]
            seq = page["next_seq"]
        kinds = [e["kind"] for e in events]
        log(kinds=kinds)
        check("seqs contiguous from 1", [e["seq"] for e in events] == list(range(1, len(events) + 1)))
        check("events have hash/kind/payload/actor",
              all(all(k in e for k in ("seq", "hash", "kind", "payload", "actor", "prev_hash", "at")) for e in events))
        check("chain links", all(events[i]["prev_hash"] == (events[i - 1]["hash"] if i else "")
                                 for i in range(len(events))))
        # svc-events(7), HASH CHAIN: hash = hex sha256 of the RFC 8785 JSON of
        # {run_id, seq, prev_hash, kind, payload, actor, at}. Python's sorted compact JSON is
        # RFC 8785 for these values (strings, integers, simple decimals).
        def jcs(v):
            return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        bad = [e["seq"] for e in events if hashlib.sha256(jcs({
            "run_id": run_id, "seq": e["seq"], "prev_hash": e["prev_hash"], "kind": e["kind"],
            "payload": e["payload"], "actor": e["actor"], "at": e["at"]}).encode()).hexdigest() != e["hash"]]
        check("every event hash recomputes from svc-events(7)", not bad, bad)
        st, run, _ = http("GET", "%s/v1/runs/%s" % (kernel, run_id))
        check("run head is the last event (last_seq, head_hash)",
              run["last_seq"] == events[-1]["seq"] and run["head_hash"] == events[-1]["hash"],
              {"last_seq": run["last_seq"], "head_hash": run["head_hash"]})
        for k in ("run.created", "step.leased", "step.failed", "step.retry_scheduled", "action.decided",
                  "approval.requested", "approval.decided", "run.parked", "run.completed", "tool.called"):
            check("event kind %s present" % k, k in kinds)

        # Post an external note with the lease header of an ended lease and with the remit token
        st, body, _ = http("POST", "%s/v1/runs/%s/events" % (kernel, run_id),
                           {"kind": "note", "payload": {"text": "hi"}, "actor": {"id": "tp", "role": "worker"}},
                           headers={"X-Svc-Remit": remit["token"]})
        check("note posted with the run's remit token (svc-events(7), X-Svc-Remit)", st == 201, body)

        st, rep, _ = http("POST", "%s/v1/runs/%s/replay" % (kernel, run_id))
        check("replay chain_valid/state_matches", st == 200 and rep["chain_valid"] and rep["state_matches"]
              and not rep["decision_mismatches"] and not rep["chain_errors"], {k: rep.get(k) for k in (
                  "chain_valid", "state_matches", "decisions", "decision_mismatches", "chain_errors")})
        p = svc("run", "replay", run_id, env=cli_env, check_rc=False)
        check("svc run replay exit 0", p.returncode == 0, p.stdout + p.stderr)
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(20)
        except subprocess.TimeoutExpired:
            daemon.kill()
    failed = [c for c in checks if not c[1]]
    log(result={"checks": len(checks), "failed": [(c[0], c[2]) for c in failed]})
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
