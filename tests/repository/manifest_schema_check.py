#!/usr/bin/env python3
"""The manifests' JSON Schema, checked with a real validator (jsonschema).

1. examples/manifest.schema.json is what `exogym-run --schema` prints with the
   built-in plugins (else it is stale: the message says how to regenerate it).
2. It is a valid draft-7 schema, and every example manifest (those git
   tracks or would, not a run's outputs ignored under examples/runs/) carries "$schema"
   pointing at it and is valid against it.
3. A misspelt key or a wrong type, at the top, in a plugin's options, in an
   optimizer or in a variant, is rejected by the schema and by exogym-run
   (exit status 2, the message naming the key's path); a variant's object
   without "name", refining the base's, is accepted.

usage: manifest_schema_check.py SOURCE_DIR BUILD_DIR
"""
import copy
import glob
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

REGENERATE = "cmake --build build --target manifest-schema"


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def strip_comments(text):
    """Removes // and /* */ comments outside strings, as exogym-run's reader
    (nlohmann::json with ignore_comments) skips them."""
    out, i, in_string = [], 0, False
    while i < len(text):
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load_manifest(path):
    with open(path) as f:
        return json.loads(strip_comments(f.read()))


def check_current(exogym_run, schema_file):
    env = {k: v for k, v in os.environ.items() if k != "EXOGYM_PLUGIN_PATH"}
    generated = subprocess.run([exogym_run, "--schema"], env=env, capture_output=True, text=True, check=True).stdout
    with open(schema_file) as f:
        if f.read() != generated:
            fail(f"{schema_file} is stale: it differs from `exogym-run --schema`. Regenerate it with `{REGENERATE}` "
                 "and commit it.")
    return json.loads(generated)


def example_manifests(source_dir):
    """The example manifests the repository holds: the JSON files under
    examples/ that git tracks or would (untracked, not ignored). Not what a user's runs left there (tools/dev
    example writes examples/runs/..., ignored by git, whose config.json files
    are manifests without "$schema"). Outside a git checkout: every JSON file
    under examples/ but examples/runs/."""
    listed = subprocess.run(["git", "-C", source_dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                             "--", "examples"], capture_output=True)
    if listed.returncode == 0 and listed.stdout:
        files = {os.path.join(source_dir, f) for f in listed.stdout.decode().split("\0") if f.endswith(".json")}
        files = [f for f in files if os.path.exists(f)]
    else:
        runs = os.path.join(source_dir, "examples", "runs") + os.sep
        files = [f for f in glob.glob(f"{source_dir}/examples/**/*.json", recursive=True) if not f.startswith(runs)]
    return sorted(files)


def check_example_listing():
    """example_manifests() in a repository where a run left its outputs in
    an ignored folder: they are not examples; a new manifest not yet added
    is."""
    with tempfile.TemporaryDirectory() as repo:
        os.makedirs(os.path.join(repo, "examples", "runs", "demo", "ddp"))
        for name, text in (("examples/demo.json", "{}"), ("examples/runs/demo/ddp/config.json", "{}"),
                           ("examples/untracked.json", "{}"), (".gitignore", "/examples/runs/\n")):
            with open(os.path.join(repo, name), "w") as f:
                f.write(text)
        git = ["git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(git + ["init", "-q"], check=True)
        subprocess.run(git + ["add", ".gitignore", "examples/demo.json"], check=True)
        subprocess.run(git + ["commit", "-qm", "x"], check=True)
        found = [os.path.relpath(f, repo) for f in example_manifests(repo)]
        if found != ["examples/demo.json", "examples/untracked.json"]:
            fail(f"the examples of a repository with ignored run outputs are {found}, not the two manifests")


def check_examples(validator, source_dir, schema_file):
    manifests = example_manifests(source_dir)
    manifests.remove(schema_file)
    for path in manifests:
        doc = load_manifest(path)
        pointer = doc.get("$schema")
        if pointer is None or os.path.normpath(os.path.join(os.path.dirname(path), pointer)) != schema_file:
            fail(f"{path}: \"$schema\" is {pointer!r}, not the relative path of {schema_file}")
        errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
        if errors:
            fail(f"{path} is not valid against the schema: {errors}")
    print(f"{len(manifests)} example manifests valid")
    return len(manifests)


def broken_manifests(base):
    """(what, JSON path exogym-run names, manifest) for each kind of mistake."""
    def edit(change):
        doc = copy.deepcopy(base)
        change(doc)
        return doc
    options = lambda d: d["strategy"]["options"]
    dirichlet = {"name": "dirichlet", "alpha": 0.1}
    refining = lambda partition: {"name": "x", "data": {"train": {"partition": partition}}}
    return [
        ("misspelt key", "nodse", edit(lambda d: d.update(nodse=d.pop("nodes")))),
        ("wrong type", "nodes", edit(lambda d: d.update(nodes="4"))),
        ("misspelt section key", "train.max_step", edit(lambda d: d["train"].update(max_step=10))),
        ("misspelt plugin option", "strategy.options.max_nrom",
         edit(lambda d: options(d).update(max_nrom=options(d).pop("max_norm")))),
        ("wrong type of a plugin option", "strategy.options.H",
         edit(lambda d: d.update(strategy={"plugin": "diloco", "options": {"H": "20"}}))),
        ("misspelt hyper-parameter", "strategy.options.optimizer.weight_decy",
         edit(lambda d: options(d)["optimizer"].update(weight_decy=0.1))),
        ("wrong choice", "output.save_model[0]", edit(lambda d: d["output"].update(save_model=["onnx"]))),
        ("wrong type in a variant", "strategy.options.H",
         edit(lambda d: d.update(runs=[{"name": "x", "strategy": {"plugin": "diloco", "options": {"H": "5"}}}]))),
        ("no seeds", "seeds", edit(lambda d: d.update(seeds=[]) or d.pop("seed", None))),
        ("a duplicate seed", "seeds[2]", edit(lambda d: d.update(seeds=[1, 2, 1]) or d.pop("seed", None))),
        ("a negative seed", "seeds[1]", edit(lambda d: d.update(seeds=[1, -2]) or d.pop("seed", None))),
        ("seeds in a variant", "runs[0].seeds",
         edit(lambda d: d.update(seeds=[1, 2], runs=[{"name": "x", "seeds": [3]}]) or d.pop("seed", None))),
        ("a named partition without its keys in a variant", "runs[0].data.train.partition.shards_per_node",
         edit(lambda d: d.update(runs=[{"name": "x", "data": {"train": {"partition": {"name": "shards"}}}}]))),
        ("a misspelt key refining a partition in a variant", "runs[0].data.train.partition.alpah",
         edit(lambda d: d["data"]["train"].update(partition=dirichlet) or d.update(runs=[refining({"alpah": 1})]))),
    ]


def check_rejections(validator, exogym_run, source_dir):
    base = load_manifest(f"{source_dir}/examples/mnist-ddp.json")
    with tempfile.TemporaryDirectory() as work:
        base["data"]["train"]["path"] = base["data"]["val"]["path"] = f"{source_dir}/examples/data/mnist"
        base["output"]["dir"] = work
        base.pop("$schema")
        if not validator.is_valid(base):
            fail("the schema refuses examples/mnist-ddp.json with its paths made absolute")
        # A variant's object without "name" refines the base's
        # (docs/manifest.md#named-objects-replace-unnamed-ones-refine).
        refined = copy.deepcopy(base)
        refined["data"]["train"]["partition"] = {"name": "dirichlet", "alpha": 0.1}
        refined["runs"] = [{"name": "x", "data": {"train": {"partition": {"alpha": 1.0}}}}]
        if not validator.is_valid(refined):
            fail(f"the schema refuses a variant refining the base's partition: {json.dumps(refined['runs'])}")
        for what, path, doc in broken_manifests(base):
            if validator.is_valid(doc):
                fail(f"{what}: the schema accepts {json.dumps(doc)}")
            manifest = os.path.join(work, "broken.json")
            with open(manifest, "w") as f:
                json.dump(doc, f)
            result = subprocess.run([exogym_run, "--quiet", manifest], capture_output=True, text=True)
            if result.returncode != 2 or path not in result.stderr:
                fail(f"{what}: exogym-run exited with {result.returncode} (expected 2, naming {path}): "
                     f"{result.stderr.strip()}")
            print(f"{what}: rejected by the schema and by exogym-run ({result.stderr.strip().splitlines()[-1]})")


def main(source_dir, build_dir):
    source_dir = os.path.abspath(source_dir)
    exogym_run = os.path.join(build_dir, "bin", "exogym-run")
    schema_file = os.path.join(source_dir, "examples", "manifest.schema.json")
    check_example_listing()
    schema = check_current(exogym_run, schema_file)
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    check_examples(validator, source_dir, schema_file)
    check_rejections(validator, exogym_run, source_dir)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
