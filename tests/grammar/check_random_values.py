"""Values generated under each schema's grammar (tests/grammar/tools/random_values.cpp, random logits,
every vocabulary) must be complete, parse as JSON and validate against the schema with Python's
jsonschema (Draft 2020-12). jsonschema comes from scripts/setup.sh; missing, the test fails."""
import json
import subprocess
import sys

import jsonschema

tool, schemas_path, *vocabularies = sys.argv[1:]
schemas = {s["name"]: s["schema"] for s in json.load(open(schemas_path, encoding="utf-8"))}
out = subprocess.run([tool, schemas_path, *vocabularies], check=True, capture_output=True, text=True).stdout
failures, count = [], 0
for line in out.splitlines():
    v = json.loads(line)
    count += 1
    where = f"{v['vocab']} / {v['schema']}: {v['text'][:200]!r}"
    if not v["complete"]:
        failures.append(f"{where}: not complete")
        continue
    try:
        jsonschema.Draft202012Validator(schemas[v["schema"]]).validate(json.loads(v["text"]))
    except (json.JSONDecodeError, jsonschema.ValidationError) as e:
        failures.append(f"{where}: {str(e).splitlines()[0]}")
print(f"{count} values, {len(failures)} failures")
for f in failures[:20]:
    print(f)
sys.exit(1 if failures or count < len(schemas) * len(vocabularies) else 0)
