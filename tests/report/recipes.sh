#!/bin/sh
# recipes.sh: the recipe and the options in the record, and dtreport's scaling studies.
#   - run.json says which --recipe trained the run ("recipe": its name, null without one) and holds
#     "options": every option the recipe and the command line gave, under its first name (aliases
#     and --amp folded in), with the value in force (the command line's over the recipe's);
#   - dtreport never takes runs with another recipe, optimizer or lr schedule for one scaling study:
#     four 1-rank resnet8 runs, three of them differing in setup (plain SGD, --opt adamw, --recipe
#     fmnist), get no speed-up against each other and a setup column saying how they differ; the
#     fourth, the plain run again under another --run-name, is compared with its twin as before;
#   - an abbreviation of --recipe (not expanded) is refused in one line.
# On the code before this, run.json had no "recipe" (--recipe was expanded away before the trainer
# saw it) and dtreport showed the adamw and recipe runs as speed-ups of the plain one.
. "$top_srcdir/tests/common.sh"
DTREPORT="$top_builddir/dtreport"
export SOURCE_DATE_EPOCH=1793000000
unset DT_LOG_LEVEL
cd "$DT_TMP"
small="--synthetic -a resnet8 --crop 32 -b 8 --max-steps 2 --epochs 1 -p 1 --results $DT_TMP/res"
# shellcheck disable=SC2086
train() { expect_status 0 env OMP_NUM_THREADS=1 "$DTRAIN" $small "$@"; }
train --run-name sgd
train --run-name sgd-again
train --run-name adamw --opt adamw --lr 0.001 --wd 0.05
# the recipe's -a resnet20 -b 64 --epochs 5 give way to the command line's; the rest are its own
# shellcheck disable=SC2086
expect_status 0 env OMP_NUM_THREADS=1 "$DTRAIN" --recipe fmnist $small --run-name fmnist
rj() { echo "$DT_TMP"/res/*-"$1"/run.json; }
for r in sgd sgd-again adamw fmnist; do
  [ -f "$(rj $r)" ] || { ls -R "$DT_TMP/res"; fail "no run.json for the $r run"; }
done

# --- run.json: the recipe and the options -----------------------------------------------------------
grep -q '^  "recipe": "fmnist",$' "$(rj fmnist)" || { cat "$(rj fmnist)"; fail "run.json does not name --recipe fmnist"; }
grep -q '^  "recipe": null,$' "$(rj sgd)" || { cat "$(rj sgd)"; fail "run.json of a run without --recipe: no \"recipe\": null"; }
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 - "$(rj sgd)" "$(rj adamw)" "$(rj fmnist)" <<'PY' || fail "run.json's options"
import json, sys
sgd, adamw, fm = (json.load(open(p)) for p in sys.argv[1:])
base = {"synthetic": True, "arch": "resnet8", "crop": "32", "batch-size": "8", "max-steps": "2", "epochs": "1",
        "print-freq": "1"}
def has(run, want, label):
    o = run["options"]
    for k, v in want.items():
        assert o.get(k) == v, (label, k, o.get(k), v, o)
has(sgd, dict(base, **{"run-name": "sgd"}), "sgd")
assert "opt" not in sgd["options"] and "recipe" not in sgd["options"], sgd["options"]
has(adamw, dict(base, **{"opt": "adamw", "lr": "0.001", "wd": "0.05"}), "adamw")
# the recipe's flags, the command line's winning: -a resnet20 -b 64 --epochs 5 are overridden
has(fm, dict(base, **{"lr": "0.4", "lr-schedule": "cosine", "wd": "5e-4", "crop-padding": "2", "run-name": "fmnist"}),
    "fmnist")
assert fm["recipe"] == "fmnist" and sgd["recipe"] is None and adamw["recipe"] is None
# the resolved configuration agrees with the options in force
assert fm["arch"] == "resnet8" and fm["batch_per_rank"] == 8 and fm["epochs"] == 1 and fm["lr_schedule"] == "cosine"
assert adamw["optimizer"]["name"] == "adamw" and sgd["optimizer"]["name"] == "sgd"
print("run.json: recipe %r, options %s" % (fm["recipe"], json.dumps(fm["options"], sort_keys=True)))
PY
fi
pass "run.json records the recipe (null without one) and each option in force"

# an alias, --amp and a repeated option: one entry each, with the last value given
train --run-name aliases --weight-decay 0.001 --wd 0.002 --amp --lr-scheduler steplr --output-dir "$DT_TMP/res"
sed -n '/^  "options": {$/,/^  }/p' "$(rj aliases)" >"$DT_TMP/options"
grep -q '"wd": "0.002"' "$DT_TMP/options" && grep -q '"opt-level": "O1"' "$DT_TMP/options" &&
  grep -q '"lr-schedule": "steplr"' "$DT_TMP/options" && grep -q "\"results\": \"$DT_TMP/res\"" "$DT_TMP/options" ||
  { cat "$(rj aliases)"; fail "aliases, --amp or a repeated option not recorded under one name with the last value"; }
grep -q '"weight-decay"\|"amp"\|"lr-scheduler"\|"output-dir"' "$DT_TMP/options" &&
  { cat "$DT_TMP/options"; fail "an alias recorded under its own name"; }
rm -r "$DT_TMP"/res/*-aliases
pass "aliases and --amp recorded under one name, the last value given"

# --- dtreport: one study per setup ------------------------------------------------------------------
expect_status 0 "$DTREPORT" res
cp "$DT_TMP/out" "$DT_TMP/R.md"
row() { grep "^| [^ ]*-resnet8-w1-$1 |" "$DT_TMP/R.md" || { cat "$DT_TMP/R.md"; fail "no row for the $1 run"; }; }
[ "$(grep -c '^## resnet8 on synthetic$' "$DT_TMP/R.md")" -eq 1 ] || { cat "$DT_TMP/R.md"; fail "not one resnet8 table"; }
grep -qF '| opt level | setup | epochs |' "$DT_TMP/R.md" || { cat "$DT_TMP/R.md"; fail "no setup column"; }
for r in sgd adamw fmnist; do
  row $r | grep -qF '| — | — |' || { row $r; fail "the $r run is compared with a run of another setup"; }
done
row sgd | grep -qF '| recipe none; optimizer sgd; schedule step |' || { row sgd; fail "the sgd run's setup"; }
row adamw | grep -qF '| recipe none; optimizer adamw; schedule step |' || { row adamw; fail "the adamw run's setup"; }
row fmnist | grep -qF '| recipe fmnist; optimizer sgd; schedule cosine |' || { row fmnist; fail "the recipe run's setup"; }
row sgd-again | grep -qE '\| [0-9]+\.[0-9]{2}x \| [0-9]+\.[0-9]%' || { row sgd-again; fail "the same setup twice: not compared"; }
grep -q '^These runs differ in setup: each setup is a study of its own' "$DT_TMP/R.md" || fail "no note under the table"
pass "three setups, three studies; the same setup twice is still compared"

# CSV and JSON carry the recipe and the setup
expect_status 0 "$DTREPORT" --format csv res
head -n 1 "$DT_TMP/out" | grep -q ',recipe,setup,notes$' || fail "CSV header: $(head -n 1 "$DT_TMP/out")"
grep -q ',fmnist,recipe fmnist; optimizer sgd; schedule cosine; crop 32; augment none; mix none; ema off; ddp accum 1,' \
  "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "CSV: the recipe run's recipe and setup"; }
if [ -x /usr/bin/python3 ]; then
  expect_status 0 "$DTREPORT" --format json res
  /usr/bin/python3 - "$DT_TMP/out" <<'PY' || fail "JSON: recipe and setup"
import json, sys
runs = {r["run"].rsplit("-w1-", 1)[1]: r for r in json.load(open(sys.argv[1]))}
assert runs["fmnist"]["recipe"] == "fmnist" and runs["sgd"]["recipe"] == "none", runs
assert runs["adamw"]["setup"]["optimizer"] == "adamw" and runs["fmnist"]["setup"]["schedule"] == "cosine"
assert runs["sgd-again"]["baseline"] == runs["sgd"]["run"] or runs["sgd"]["baseline"] == runs["sgd-again"]["run"]
for r in ("adamw", "fmnist"):
    assert runs[r]["speedup"] is None and runs[r]["baseline"] is None, runs[r]
PY
fi
pass "CSV and JSON: the recipe and the setup"

# a run.json from before "recipe" and "options": compared with its like only, never with a new run
mkdir old
cp -r "$DT_TMP"/res/*-sgd "old/old-sgd"
/usr/bin/python3 -c 'import json, sys; p = sys.argv[1]; j = json.load(open(p)); del j["recipe"], j["options"]; json.dump(j, open(p, "w"))' \
  old/old-sgd/run.json 2>/dev/null || sed -i '/"recipe"/d' old/old-sgd/run.json
expect_status 0 "$DTREPORT" res old
grep '^| old-sgd |' "$DT_TMP/out" | grep -qF '| recipe ?' || { cat "$DT_TMP/out"; fail "the old run's recipe is not shown unknown"; }
grep '^| old-sgd |' "$DT_TMP/out" | grep -qF '| — | — |' || { cat "$DT_TMP/out"; fail "an old run compared with a new one"; }
pass "an older run.json: its recipe unknown, compared with no run that records one"

# --- --recipe abbreviated: not expanded, so refused -----------------------------------------------------
# shellcheck disable=SC2086
expect_status 2 "$DTRAIN" --rec fmnist $small
[ "$(grep -c . "$DT_TMP/err")" -eq 1 ] && grep -q -- '--rec: give --recipe in full' "$DT_TMP/err" ||
  { cat "$DT_TMP/err"; fail "--rec fmnist: not one line asking for --recipe"; }
pass "--rec NAME: one line, exit 2"
