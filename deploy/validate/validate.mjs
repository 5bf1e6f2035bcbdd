#!/usr/bin/env node
// Offline checks of Kubernetes manifests: what a kube-apiserver would reject,
// found without one. For each object of a multi-document YAML stream:
//   1. the Kubernetes JSON schema of its apiVersion/kind (npm kubernetes-models);
//   2. no unknown fields (kubectl's default --validate=strict rejects them, and
//      the schemas alone let a misspelt `readinessProbes` through);
//   3. references between the objects: selectors that select a pod template,
//      named ports that exist, `$(VAR)` in args that the container defines,
//      and the ServiceAccount, Role, PVC or HPA target that each names.
//
// Usage: node validate.mjs [--expect-invalid] [--namespace NS] [--kustomize DIR]... [FILE | -]...
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
//                     wrong reason, fails
// Exit status: 0 when the expectation holds, 1 when it does not, 2 on misuse.

import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const EXPECTED_ERROR = "validate.somm/expected-error";
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
  const opts = { expectInvalid: false, namespace: "default", sources: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--expect-invalid") opts.expectInvalid = true;
    else if (a === "--namespace") {
      if (i + 1 >= argv.length) die("--namespace needs a name");
      opts.namespace = argv[++i];
    } else if (a === "--kustomize") {
      if (i + 1 >= argv.length) die("--kustomize needs a directory");
      opts.sources.push({ kustomize: argv[++i] });
    } else if (a === "-h" || a === "--help") {
      const lines = readFileSync(new URL(import.meta.url), "utf8").split("\n").slice(1, 23);
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

async function schemaFor(apiVersion, kind) {
  const id = `${apiVersion}/${kind}`;
  if (!schemaCache.has(id)) {
    let found = null;
    if (API_VERSION.test(apiVersion) && KIND.test(kind)) {
      try {
        const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
        const Model = mod[kind];
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

function checkPodSpec(spec, ns, index, where) {
  const errors = [];
  if (spec.serviceAccountName && spec.serviceAccountName !== "default" &&
      !index.has(refKey("ServiceAccount", ns, spec.serviceAccountName))) {
    errors.push(`${where}/serviceAccountName: no ServiceAccount "${spec.serviceAccountName}"`);
  }
  const volumes = new Set();
  (spec.volumes || []).forEach((v, i) => {
    volumes.add(v.name);
    const claim = v.persistentVolumeClaim?.claimName;
    if (claim && !index.has(refKey("PersistentVolumeClaim", ns, claim))) {
      errors.push(`${where}/volumes/${i}: no PersistentVolumeClaim "${claim}"`);
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
  });
  return { errors, portNames };
}

function checkReferences(objects) {
  const index = new Map(objects.map((o) => [refKey(o.kind, namespaceOf(o), o.metadata?.name), o]));
  const pods = []; // { ns, labels, portNames }
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
    const { errors: podErrors, portNames } = checkPodSpec(template.spec || {}, ns, index, "/spec/template/spec");
    errors.push(...podErrors);
    pods.push({ ns, labels: template.metadata?.labels || {}, portNames });
  }
  for (const o of objects) {
    const ns = namespaceOf(o);
    const errors = errorsOf.get(o);
    const selected = (selector) => pods.filter((p) => p.ns === ns && selects(selector, p.labels));
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
      else if (doc.contents !== null) objects.push(doc.toJS());
    });
  }
  if (parseErrors.length) {
    console.error(parseErrors.map((e) => `YAML error: ${e}`).join("\n"));
    process.exit(1);
  }
  if (objects.length === 0) die("no objects in the input");

  const label = (o) => `${o.kind} ${namespaceOf(o) ? `${namespaceOf(o)}/` : ""}${o.metadata?.name}`;
  const problems = new Map();
  const crossErrors = checkReferences(objects);
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
    console.log(`all ${objects.length} broken objects were rejected for the expected reasons`);
    return;
  }
  if (problems.size) {
    console.log(`FAIL: ${problems.size} of ${objects.length} objects are invalid`);
    process.exit(1);
  }
  console.log(`all ${objects.length} objects are valid`);
}

await main();
