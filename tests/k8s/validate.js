// Validates every object of rendered Kubernetes YAML against the Kubernetes schemas
// (npm kubernetes-models; the Prometheus Operator and cert-manager CRDs from their
// @kubernetes-models packages). Exits 1 naming each invalid object, or an object of a kind
// it has no schema for.
//   node tests/k8s/validate.js FILE...
//   node tests/k8s/validate.js --self-test   (a broken Deployment must be refused)
"use strict";
const fs = require("fs");
const path = require("path");
const tools = path.join(__dirname, "..", "..", "tools", "node_modules");
const yaml = require(path.join(tools, "js-yaml"));

const PACKAGES = ["kubernetes-models", "@kubernetes-models/prometheus-operator",
                  "@kubernetes-models/cert-manager"];

function modelFor(apiVersion, kind) {
  for (const pkg of PACKAGES) {
    let mod;
    try {
      mod = require(path.join(tools, pkg, apiVersion));  // ".../v1" or ".../apps/v1"
    } catch (e) {
      continue;
    }
    if (mod[kind]) return mod[kind];
  }
  return null;
}

function validate(doc, where) {
  const Model = modelFor(doc.apiVersion || "", doc.kind || "");
  if (!Model) return `${where}: no schema for ${doc.apiVersion} ${doc.kind}`;
  try {
    new Model(doc).validate();
    return null;
  } catch (e) {
    return `${where}: ${doc.kind} ${doc.metadata && doc.metadata.name}: ${e.message}`;
  }
}

function main(args) {
  if (args[0] === "--self-test") {
    const broken = {apiVersion: "apps/v1", kind: "Deployment", metadata: {name: "x"},
                    spec: {replicas: "two", selector: {}, template: {spec: {containers: [{}]}}}};
    if (!validate(broken, "self-test")) {
      console.error("validate.js: a broken Deployment passed: the validator checks nothing");
      return 1;
    }
    console.log("validate.js: self-test refused a broken Deployment, as it must");
    return 0;
  }
  let errors = 0, objects = 0;
  for (const file of args) {
    for (const doc of yaml.loadAll(fs.readFileSync(file, "utf8"))) {
      if (!doc) continue;
      ++objects;
      const error = validate(doc, file);
      if (error) {
        console.error(error);
        ++errors;
      }
    }
  }
  console.log(`validate.js: ${objects} objects, ${errors} invalid`);
  return errors === 0 && objects > 0 ? 0 : 1;
}

process.exit(main(process.argv.slice(2)));
