#!/usr/bin/env node
// Offline checks of Kubernetes manifests: what a kube-apiserver would reject,
// found without one. For each object of a multi-document YAML stream:
//   1. the Kubernetes JSON schema of its apiVersion/kind (npm kubernetes-models);
//   2. no unknown fields (kubectl's default --validate=strict rejects them, and
//      the schemas alone let a misspelt `readinessProbes` through);
//   3. references between the objects: selectors that select a pod template,
//      named ports that exist, `$(VAR)` in args that the container defines,
//      and the ServiceAccount, Role, PVC or HPA target that each names;
//      NetworkPolicies and PodMonitors that select pods and name their ports;
//   4. every pod runs restricted: runAsNonRoot, a non-root runAsUser,
//      seccomp RuntimeDefault, and per container readOnlyRootFilesystem,
//      allowPrivilegeEscalation false, capabilities drop ALL; a path a somm
//      process writes (--state-dir; the controller's --model-repository) is
//      on a writable volume;
//   5. every Secret referenced (volumes, env, PodMonitor credentials) is in
//      the input with each key used (items, secretKeyRef, a file path in
//      args or env under the Secret's mount), or documented: FILE of
//      --secrets-doc holds `create secret generic NAME` with those keys.
//
// Usage: node validate.mjs [--expect-invalid] [--namespace NS] [--secrets-doc FILE]
//                          [--kustomize DIR]... [FILE | -]...
//   --kustomize DIR   render DIR with `kubectl kustomize` (SOMM_KUBECTL overrides
//                     the kubectl binary) and check the result
//   FILE | -          check a YAML file, or standard input
//   --namespace NS    the namespace of objects that name none, as with
//                     `kubectl apply -n NS` (default: default); for the
//                     output of `helm template -n NS`
//   --expect-invalid  the negative test: succeed only if every object is
//                     rejected, each with the error that its annotation
//                     validate.somm/expected-error names (a substring), so a
//                     validator that accepts anything, or rejects for the
//                     wrong reason, fails; objects annotated
//                     validate.somm/support: "true" (what a broken one needs,
//                     as a Secret it mounts) are exempt
//   --secrets-doc FILE  Secrets not in the input must be created by a
//                     `kubectl ... create secret generic NAME --from-file=KEY=...`
//                     command in FILE (deploy/README.md), with every key used
// Exit status: 0 when the expectation holds, 1 when it does not, 2 on misuse.

import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const EXPECTED_ERROR = "validate.somm/expected-error";
const SUPPORT = "validate.somm/support";
const REMEDY = "run `npm ci` in deploy/validate (scripts/setup does it)";

function die(message) {
  console.error(`validate.mjs: ${message}`);
  process.exit(2);
}

async function importOrDie(specifier) {
  try {
    return await import(specifier);
  } catch (e) {
    die(`cannot load ${specifier}: ${e.message}\n  ${REMEDY}`);
  }
}

// ---- input

function parseArgs(argv) {
  const opts = { expectInvalid: false, namespace: "default", sources: [], secretsDoc: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--expect-invalid") opts.expectInvalid = true;
    else if (a === "--namespace") {
      if (i + 1 >= argv.length) die("--namespace needs a name");
      opts.namespace = argv[++i];
    } else if (a === "--secrets-doc") {
      if (i + 1 >= argv.length) die("--secrets-doc needs a file");
      opts.secretsDoc = argv[++i];
    } else if (a === "--kustomize") {
      if (i + 1 >= argv.length) die("--kustomize needs a directory");
      opts.sources.push({ kustomize: argv[++i] });
    } else if (a === "-h" || a === "--help") {
      const lines = readFileSync(new URL(import.meta.url), "utf8").split("\n").slice(1, 40);
      console.log(lines.map((l) => l.replace(/^\/\/ ?/, "")).join("\n"));
      process.exit(0);
    } else if (a.startsWith("--")) die(`unknown option ${a}`);
    else opts.sources.push({ file: a });
  }
  if (opts.sources.length === 0) opts.sources.push({ file: "-" });
  return opts;
}

function readSource(source) {
  if (source.file !== undefined) {
    const name = source.file === "-" ? "<stdin>" : source.file;
    try {
      return { name, text: readFileSync(source.file === "-" ? 0 : source.file, "utf8") };
    } catch (e) {
      die(`cannot read ${name}: ${e.message}`);
    }
  }
  const kubectl = process.env.SOMM_KUBECTL || "kubectl";
  try {
    const text = execFileSync(kubectl, ["kustomize", source.kustomize], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    return { name: `kubectl kustomize ${source.kustomize}`, text };
  } catch (e) {
    if (e.code === "ENOENT") die(`${kubectl} not found; kubectl renders the kustomizations offline`);
    die(`kubectl kustomize ${source.kustomize} failed:\n${e.stderr || e.message}`);
  }
}

// ---- 1 and 2: schema and unknown fields

// Runs a compiled ajv validator over a Proxy of the object and records which
// property names it looks up. The Kubernetes schemas list each struct's
// fields under `properties`, so a present key the validator never asked for
// is a field the API does not have. Objects whose schema looks at no field
// at all (free-form ones such as RawExtension) are left alone.
function unknownFields(validateFn, object) {
  const seen = new Map(); // JSON pointer -> { value, names }
  const wrap = (value, path) => {
    if (value === null || typeof value !== "object") return value;
    let entry = seen.get(path);
    if (!entry) {
      entry = { value, names: new Set() };
      seen.set(path, entry);
      entry.proxy = new Proxy(value, {
        get(target, key, receiver) {
          const child = Reflect.get(target, key, receiver);
          if (typeof key !== "string") return child;
          entry.names.add(key);
          return Object.hasOwn(target, key) ? wrap(child, `${path}/${key}`) : child;
        },
        has(target, key) {
          if (typeof key === "string") entry.names.add(key);
          return Reflect.has(target, key);
        },
        ownKeys(target) {
          // Maps (labels, resources.limits...) are walked key by key.
          const keys = Reflect.ownKeys(target);
          for (const k of keys) if (typeof k === "string") entry.names.add(k);
          return keys;
        },
      });
    }
    return entry.proxy;
  };
  validateFn(wrap(object, ""));
  const errors = [];
  for (const [path, { value, names }] of seen) {
    if (Array.isArray(value) || names.size === 0) continue;
    for (const key of Object.keys(value)) {
      if (!names.has(key)) errors.push(`${path || "/"}: unknown field "${key}"`);
    }
  }
  return errors;
}

const API_VERSION = /^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/;
const KIND = /^[A-Z][A-Za-z0-9]*$/;
const schemaCache = new Map();
const CRD_PACKAGES = { "monitoring.coreos.com": "@kubernetes-models/prometheus-operator" };

async function schemaFor(apiVersion, kind) {
  const id = `${apiVersion}/${kind}`;
  if (!schemaCache.has(id)) {
    let found = null;
    if (API_VERSION.test(apiVersion) && KIND.test(kind)) {
      try {
        // Custom resources come from their own npm package, one module per
        // group version (package.json); the API's own from kubernetes-models.
        const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
        const mod = CRD_PACKAGES[group]
          ? await import(`${CRD_PACKAGES[group]}/${apiVersion}`)
          : await import(`kubernetes-models/${apiVersion}/${kind}`);
        const Model = mod[kind];
        if (typeof Model !== "function") throw Object.assign(new Error(kind), { code: "ERR_MODULE_NOT_FOUND" });
        // The model's validate() runs the compiled schema on `this`, so it
        // can be handed a Proxy; it throws when the object is invalid.
        const validate = (data) => {
          try {
            Model.prototype.validate.call(data);
          } catch {
            // Schema errors are reported by the plain run in checkSchema.
          }
        };
        found = { Model, validate };
      } catch (e) {
        if (e.code !== "ERR_MODULE_NOT_FOUND" && e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw e;
      }
    }
    schemaCache.set(id, found);
  }
  return schemaCache.get(id);
}

async function checkSchema(object) {
  const { apiVersion, kind } = object;
  // A Secret's data is base64; the API server ignores line breaks in it (Go's
  // decoder does), and kustomize's secretGenerator wraps long values.
  if (kind === "Secret" && object.data && typeof object.data === "object") {
    object = { ...object, data: Object.fromEntries(Object.entries(object.data).map(
      ([k, v]) => [k, typeof v === "string" ? v.replace(/[\r\n]/g, "") : v])) };
  }
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    return ["apiVersion and kind must be strings"];
  }
  const schema = await schemaFor(apiVersion, kind);
  if (!schema) return [`no Kubernetes schema for apiVersion "${apiVersion}", kind "${kind}"`];
  try {
    new schema.Model(object).validate();
  } catch (e) {
    if (!Array.isArray(e.errors)) throw e;
    return e.errors.map((err) => `${err.instancePath || "/"}: ${err.message}`);
  }
  return unknownFields(schema.validate, object);
}

// ---- 3: references between objects

const CLUSTER_SCOPED = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass", "CustomResourceDefinition", "PriorityClass"]);
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

let defaultNamespace = "default";
const namespaceOf = (o) => (CLUSTER_SCOPED.has(o.kind) ? "" : o.metadata?.namespace || defaultNamespace);
const refKey = (kind, ns, name) => `${kind}/${ns}/${name}`;

function podTemplate(o) {
  if (["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"].includes(o.kind)) return o.spec?.template;
  if (o.kind === "CronJob") return o.spec?.jobTemplate?.spec?.template;
  return undefined;
}

const selects = (selector, labels) =>
  Object.entries(selector || {}).every(([k, v]) => labels?.[k] === v);

function checkNames(o) {
  const errors = [];
  const name = o.metadata?.name ?? "";
  // Services and Namespaces become DNS labels; a Service's must start with a letter.
  const ok = ["Service", "Namespace"].includes(o.kind)
    ? DNS_LABEL.test(name) && name.length <= 63 && (o.kind !== "Service" || /^[a-z]/.test(name))
    : DNS_SUBDOMAIN.test(name) && name.length <= 253;
  if (!ok) {
    errors.push(`/metadata/name: "${name}" is not a valid ${o.kind} name`);
  }
  return errors;
}

// Restricted pods (the Pod Security Standard "restricted", plus a read-only
// root filesystem): what each container must run with, the pod's
// securityContext filling in what the container's leaves out.
function checkRestricted(spec, c, at) {
  const errors = [];
  const pod = spec.securityContext || {};
  const own = c.securityContext || {};
  const runAsNonRoot = own.runAsNonRoot ?? pod.runAsNonRoot;
  const runAsUser = own.runAsUser ?? pod.runAsUser;
  const seccomp = (own.seccompProfile ?? pod.seccompProfile)?.type;
  if (runAsNonRoot !== true) errors.push(`${at}: securityContext: runAsNonRoot is not true`);
  if (!(Number.isInteger(runAsUser) && runAsUser > 0)) {
    errors.push(`${at}: securityContext: runAsUser is not set to a non-root user`);
  }
  if (seccomp !== "RuntimeDefault" && seccomp !== "Localhost") {
    errors.push(`${at}: securityContext: seccompProfile is not RuntimeDefault`);
  }
  if (own.allowPrivilegeEscalation !== false) errors.push(`${at}: securityContext: allowPrivilegeEscalation is not false`);
  if (own.readOnlyRootFilesystem !== true) errors.push(`${at}: securityContext: readOnlyRootFilesystem is not true`);
  if (!(own.capabilities?.drop || []).includes("ALL")) errors.push(`${at}: securityContext: capabilities do not drop ALL`);
  if ((own.capabilities?.add || []).length) errors.push(`${at}: securityContext: capabilities add ${own.capabilities.add.join(", ")}`);
  if (own.privileged === true) errors.push(`${at}: securityContext: privileged`);
  return errors;
}

// Flags whose path a somm process writes under, by subcommand ("*": any).
const WRITTEN_PATHS = { "--state-dir": "*", "--local-worker-log-dir": "*", "--model-repository": "controller" };

// The mount that holds `path` (the longest mountPath that is a prefix).
function mountOf(c, path) {
  let best;
  for (const m of c.volumeMounts || []) {
    const mp = m.mountPath.replace(/\/+$/, "");
    if ((path === mp || path.startsWith(`${mp}/`)) && (!best || mp.length > best.mountPath.length)) {
      best = { ...m, mountPath: mp };
    }
  }
  return best;
}

// secretRefs: [{ ns, name, keys: Set, where }] collected for checkSecrets.
function checkPodSpec(spec, ns, index, where, secretRefs) {
  const errors = [];
  if (spec.serviceAccountName && spec.serviceAccountName !== "default" &&
      !index.has(refKey("ServiceAccount", ns, spec.serviceAccountName))) {
    errors.push(`${where}/serviceAccountName: no ServiceAccount "${spec.serviceAccountName}"`);
  }
  const volumes = new Map();
  (spec.volumes || []).forEach((v, i) => {
    volumes.set(v.name, v);
    const claim = v.persistentVolumeClaim?.claimName;
    if (claim && !index.has(refKey("PersistentVolumeClaim", ns, claim))) {
      errors.push(`${where}/volumes/${i}: no PersistentVolumeClaim "${claim}"`);
    }
    if (v.secret?.secretName) {
      const keys = new Set((v.secret.items || []).map((it) => it.key));
      secretRefs.push({ ns, name: v.secret.secretName, keys, where: `${where}/volumes/${i} (${v.name})`, optional: v.secret.optional });
    }
  });
  const portNames = new Set();
  const containers = [...(spec.initContainers || []), ...(spec.containers || [])];
  containers.forEach((c, ci) => {
    const at = `${where}/containers/${ci} (${c.name})`;
    const own = new Set();
    for (const p of c.ports || []) {
      if (p.name === undefined) continue;
      if (!(DNS_LABEL.test(p.name) && p.name.length <= 15 && /[a-z]/.test(p.name))) {
        errors.push(`${at}: port name "${p.name}" is not an IANA service name (15 characters at most)`);
      }
      if (portNames.has(p.name)) errors.push(`${at}: port name "${p.name}" is used twice in the pod`);
      portNames.add(p.name);
      own.add(p.name);
    }
    for (const m of c.volumeMounts || []) {
      if (!volumes.has(m.name)) errors.push(`${at}: volumeMount "${m.name}" names no volume`);
    }
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      const handler = c[probe]?.httpGet || c[probe]?.tcpSocket;
      if (typeof handler?.port === "string" && !own.has(handler.port)) {
        errors.push(`${at}: ${probe} port "${handler.port}" is not one of the container's named ports`);
      }
    }
    // Kubernetes leaves an undefined $(VAR) in place, verbatim: a silent bug.
    const defined = new Set((c.env || []).map((e) => e.name));
    const texts = [...(c.command || []), ...(c.args || []), ...(c.env || []).map((e) => e.value ?? "")];
    for (const text of texts) {
      for (const [, name] of String(text).replaceAll("$$", "").matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g)) {
        if (!defined.has(name)) errors.push(`${at}: "$(${name})" is not an env variable of the container`);
      }
    }
    errors.push(...checkRestricted(spec, c, at));
    // A file named in args or env under a Secret's mount is one of its keys:
    // a path alone, or inside a value (--flag=PATH, a URL's ?ca=PATH&key=PATH).
    const paths = texts.flatMap((t) => [...String(t).matchAll(/(?:^|[=?&,])(\/[^=?&,\s]*)/g)].map((m) => m[1]));
    for (const text of paths) {
      const m = mountOf(c, text);
      const v = m && volumes.get(m.name);
      if (!v?.secret?.secretName || text === m.mountPath) continue;
      const file = text.slice(m.mountPath.length + 1).split("/")[0];
      if (v.secret.items) {
        const item = v.secret.items.find((it) => it.path === file || it.path.split("/")[0] === file);
        if (!item) errors.push(`${at}: "${text}" is no item of volume "${v.name}" (Secret "${v.secret.secretName}")`);
      } else {
        secretRefs.push({ ns, name: v.secret.secretName, keys: new Set([file]), where: `${at}: "${text}"`, optional: v.secret.optional });
      }
    }
    for (const e of [...(c.env || []), ...(c.envFrom || [])]) {
      const ref = e.valueFrom?.secretKeyRef;
      if (ref?.name) secretRefs.push({ ns, name: ref.name, keys: new Set([ref.key]), where: `${at}: env ${e.name}`, optional: ref.optional });
      if (e.secretRef?.name) secretRefs.push({ ns, name: e.secretRef.name, keys: new Set(), where: `${at}: envFrom`, optional: e.secretRef.optional });
    }
    // What somm writes must be on a writable volume (the root is read-only).
    const args = [...(c.command || []), ...(c.args || [])];
    const subcommand = (c.args || [])[0];
    args.forEach((a, i) => {
      const only = WRITTEN_PATHS[a];
      if (!only || (only !== "*" && only !== subcommand) || i + 1 >= args.length) return;
      const path = args[i + 1];
      const m = mountOf(c, path);
      const v = m && volumes.get(m.name);
      const writable = m && !m.readOnly && v && (v.emptyDir || v.persistentVolumeClaim || v.hostPath || v.ephemeral || v.nfs || v.csi) &&
        !v.persistentVolumeClaim?.readOnly;
      if (!writable) errors.push(`${at}: ${a} ${path} is not on a writable volume`);
    });
  });
  return { errors, portNames };
}

// A LabelSelector (matchLabels and matchExpressions) against labels.
function selectorMatches(selector, labels) {
  if (!selector) return false;
  if (!selects(selector.matchLabels, labels)) return false;
  return (selector.matchExpressions || []).every(({ key, operator, values = [] }) => {
    const has = Object.hasOwn(labels || {}, key);
    if (operator === "In") return has && values.includes(labels[key]);
    if (operator === "NotIn") return !has || !values.includes(labels[key]);
    if (operator === "Exists") return has;
    if (operator === "DoesNotExist") return !has;
    return false;
  });
}

// Keys that `kubectl create secret generic NAME` in a document gives each
// Secret: --from-file=[KEY=]PATH (the key defaults to the file's name) and
// --from-literal=KEY=VALUE.
function documentedSecrets(file) {
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    die(`cannot read --secrets-doc ${file}: ${e.message}`);
  }
  const out = new Map();
  const joined = text.replace(/\\\n\s*/g, " ");
  for (const line of joined.split("\n")) {
    const m = line.match(/create\s+secret\s+generic\s+([a-z0-9][-a-z0-9.]*)(.*)$/);
    if (!m) continue;
    const keys = out.get(m[1]) || new Set();
    for (const [, kind, value] of m[2].matchAll(/--from-(file|literal)[= ]("[^"]*"|'[^']*'|\S+)/g)) {
      const v = value.replace(/^["']|["']$/g, "");
      if (kind === "literal") keys.add(v.split("=")[0]);
      else keys.add(v.includes("=") ? v.split("=")[0] : v.split("/").pop());
    }
    out.set(m[1], keys);
  }
  return out;
}

function checkSecrets(objects, secretRefs, errorsOf, secretsDoc) {
  const secrets = new Map();
  for (const o of objects) {
    if (o.kind !== "Secret") continue;
    const keys = new Set([...Object.keys(o.data || {}), ...Object.keys(o.stringData || {})]);
    secrets.set(refKey("Secret", namespaceOf(o), o.metadata?.name), keys);
  }
  const documented = secretsDoc ? documentedSecrets(secretsDoc) : new Map();
  const missing = new Set(); // a missing Secret is reported once per object
  for (const { ns, name, keys, where, optional, object } of secretRefs) {
    if (optional) continue;
    const errors = errorsOf.get(object);
    const have = secrets.get(refKey("Secret", ns, name)) ?? documented.get(name);
    const from = secrets.has(refKey("Secret", ns, name)) ? "in the input" : `in ${secretsDoc}`;
    if (!have) {
      const seen = `${refKey(object.kind, namespaceOf(object), object.metadata?.name)} ${name}`;
      if (missing.has(seen)) continue;
      missing.add(seen);
      errors.push(`${where}: Secret "${name}" is neither in the input nor created in ${secretsDoc ?? "a --secrets-doc"}`);
      continue;
    }
    for (const k of keys) {
      if (!have.has(k)) errors.push(`${where}: Secret "${name}" (${from}) has no key "${k}"`);
    }
  }
}

function checkReferences(objects, secretsDoc) {
  const index = new Map(objects.map((o) => [refKey(o.kind, namespaceOf(o), o.metadata?.name), o]));
  const pods = []; // { ns, labels, portNames }
  const secretRefs = [];
  const errorsOf = new Map(objects.map((o) => [o, checkNames(o)]));
  for (const o of objects) {
    const template = podTemplate(o);
    if (!template) continue;
    const ns = namespaceOf(o);
    const errors = errorsOf.get(o);
    const matchLabels = o.spec?.selector?.matchLabels;
    if (matchLabels && !selects(matchLabels, template.metadata?.labels)) {
      errors.push("/spec/selector: does not match the pod template's labels");
    }
    const refs = [];
    const { errors: podErrors, portNames } = checkPodSpec(template.spec || {}, ns, index, "/spec/template/spec", refs);
    errors.push(...podErrors);
    for (const r of refs) secretRefs.push({ ...r, object: o });
    pods.push({ ns, labels: template.metadata?.labels || {}, portNames });
  }
  for (const o of objects) {
    const ns = namespaceOf(o);
    const errors = errorsOf.get(o);
    const selected = (selector) => pods.filter((p) => p.ns === ns && selects(selector, p.labels));
    const selectedBy = (selector) => pods.filter((p) => p.ns === ns && selectorMatches(selector, p.labels));
    if (o.kind === "Service" && o.spec?.selector) {
      const targets = selected(o.spec.selector);
      if (targets.length === 0) errors.push("/spec/selector: selects no pod template");
      for (const p of o.spec.ports || []) {
        if (typeof p.targetPort === "string" && targets.some((t) => !t.portNames.has(p.targetPort))) {
          errors.push(`/spec/ports (${p.name ?? p.port}): targetPort "${p.targetPort}" is not a named port of the selected pods`);
        }
      }
    }
    if (o.kind === "PodDisruptionBudget" && selected(o.spec?.selector?.matchLabels).length === 0) {
      errors.push("/spec/selector: selects no pod template");
    }
    if (o.kind === "NetworkPolicy") {
      const targets = selectedBy(o.spec?.podSelector);
      if (targets.length === 0) errors.push("/spec/podSelector: selects no pod template");
      (o.spec?.ingress || []).forEach((rule, ri) => {
        for (const p of rule.ports || []) {
          if (typeof p.port === "string" && targets.some((t) => !t.portNames.has(p.port))) {
            errors.push(`/spec/ingress/${ri}/ports: port "${p.port}" is not a named port of the selected pods`);
          }
        }
        (rule.from || []).forEach((peer, pi) => {
          if (peer.podSelector && !peer.namespaceSelector && selectedBy(peer.podSelector).length === 0) {
            errors.push(`/spec/ingress/${ri}/from/${pi}/podSelector: selects no pod template`);
          }
        });
      });
    }
    if (o.kind === "PodMonitor" || o.kind === "ServiceMonitor") {
      const endpoints = o.kind === "PodMonitor" ? o.spec?.podMetricsEndpoints : o.spec?.endpoints;
      const targets = o.kind === "PodMonitor" ? selectedBy(o.spec?.selector) : [];
      if (o.kind === "PodMonitor" && targets.length === 0) errors.push("/spec/selector: selects no pod template");
      (endpoints || []).forEach((ep, ei) => {
        const at = `/spec/${o.kind === "PodMonitor" ? "podMetricsEndpoints" : "endpoints"}/${ei}`;
        if (o.kind === "PodMonitor" && ep.port && targets.some((t) => !t.portNames.has(ep.port))) {
          errors.push(`${at}: port "${ep.port}" is not a named port of the selected pods`);
        }
        const refs = [
          [ep.authorization?.credentials, "authorization.credentials"],
          [ep.bearerTokenSecret, "bearerTokenSecret"],
          [ep.tlsConfig?.ca?.secret, "tlsConfig.ca"],
          [ep.tlsConfig?.cert?.secret, "tlsConfig.cert"],
          [ep.tlsConfig?.keySecret, "tlsConfig.keySecret"],
        ];
        for (const [ref, what] of refs) {
          if (ref?.name) secretRefs.push({ ns, name: ref.name, keys: new Set([ref.key]), where: `${at}/${what}`, optional: ref.optional, object: o });
        }
      });
    }
    if (o.kind === "HorizontalPodAutoscaler") {
      const t = o.spec?.scaleTargetRef || {};
      if (!index.has(refKey(t.kind, ns, t.name))) errors.push(`/spec/scaleTargetRef: no ${t.kind} "${t.name}"`);
    }
    if (o.kind === "RoleBinding") {
      const r = o.roleRef || {};
      if (r.kind === "Role" && !index.has(refKey("Role", ns, r.name))) errors.push(`/roleRef: no Role "${r.name}"`);
      for (const s of o.subjects || []) {
        if (s.kind === "ServiceAccount" && !index.has(refKey("ServiceAccount", s.namespace || ns, s.name))) {
          errors.push(`/subjects: no ServiceAccount "${s.name}" in namespace "${s.namespace || ns}"`);
        }
      }
    }
  }
  checkSecrets(objects, secretRefs, errorsOf, secretsDoc);
  return errorsOf;
}

// ---- main

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  defaultNamespace = opts.namespace;
  const YAML = await importOrDie("yaml");
  await importOrDie("kubernetes-models/apps/v1/Deployment");

  const objects = [];
  const parseErrors = [];
  for (const source of opts.sources) {
    const { name, text } = readSource(source);
    YAML.parseAllDocuments(text).forEach((doc, i) => {
      if (doc.errors.length) parseErrors.push(`${name}, document ${i + 1}: ${doc.errors[0].message}`);
      else if (doc.contents !== null) {
        // Empty documents (a template's trailing `---`) hold no object.
        const object = doc.toJS();
        if (object !== null && object !== undefined) objects.push(object);
      }
    });
  }
  if (parseErrors.length) {
    console.error(parseErrors.map((e) => `YAML error: ${e}`).join("\n"));
    process.exit(1);
  }
  if (objects.length === 0) die("no objects in the input");

  const label = (o) => `${o.kind} ${namespaceOf(o) ? `${namespaceOf(o)}/` : ""}${o.metadata?.name}`;
  const problems = new Map();
  const crossErrors = checkReferences(objects, opts.secretsDoc);
  for (const o of objects) {
    const errors = [...(await checkSchema(o)), ...crossErrors.get(o)];
    if (errors.length) problems.set(o, errors);
  }

  for (const o of objects) {
    const errors = problems.get(o);
    if (!errors) console.log(`ok       ${label(o)}`);
    else for (const e of errors) console.log(`invalid  ${label(o)}: ${e}`);
  }
  if (opts.expectInvalid) {
    const missed = [];
    for (const o of objects) {
      // An object the broken ones need (a Secret they mount) is no test itself.
      if (o.metadata?.annotations?.[SUPPORT] === "true") continue;
      const expected = o.metadata?.annotations?.[EXPECTED_ERROR];
      const errors = problems.get(o) || [];
      if (errors.length === 0) missed.push(`${label(o)} was accepted`);
      else if (expected && !errors.some((e) => e.includes(expected))) {
        missed.push(`${label(o)} was rejected, but not with "${expected}"`);
      }
    }
    if (missed.length) {
      console.log(`FAIL: ${missed.length} broken object(s) got through:\n  ${missed.join("\n  ")}`);
      process.exit(1);
    }
    const tested = objects.filter((o) => o.metadata?.annotations?.[SUPPORT] !== "true").length;
    console.log(`all ${tested} broken objects were rejected for the expected reasons`);
    return;
  }
  if (problems.size) {
    console.log(`FAIL: ${problems.size} of ${objects.length} objects are invalid`);
    process.exit(1);
  }
  console.log(`all ${objects.length} objects are valid`);
}

await main();
