#!/bin/sh
# svg.sh: the SVG charts of src/report/svg.c, read by real tools. test_svg --write writes three
# sample charts (a learning curve with a gap, a throughput chart with a dashed ideal line, a log-y
# loss scale); xmllint must find each well-formed XML whose root is an svg element, and, where
# rsvg-convert is installed, each must render to a PNG of the size the file declares (720 x 440)
# that holds more than a blank page of that size does. Skipped without xmllint (Debian:
# libxml2-utils); without rsvg-convert (Debian: librsvg2-bin) only the rendering is left out, and
# the log says so.
. "$top_srcdir/tests/common.sh"

command -v xmllint >/dev/null 2>&1 || skip "xmllint not found (Debian: libxml2-utils)"
"$top_builddir/tests/unit/test_svg" --write "$DT_TMP/svg" >"$DT_TMP/paths" || fail "test_svg --write failed"
charts="learning throughput loss_scale"
for c in $charts; do
  grep -qx "$DT_TMP/svg/$c.svg" "$DT_TMP/paths" || fail "test_svg --write did not print $DT_TMP/svg/$c.svg: $(cat "$DT_TMP/paths")"
done
[ "$(wc -l <"$DT_TMP/paths")" -eq 3 ] || fail "test_svg --write printed $(wc -l <"$DT_TMP/paths") paths, 3 expected"
[ "$(ls "$DT_TMP/svg" | wc -l)" -eq 3 ] || fail "not exactly the three charts in $DT_TMP/svg: $(ls "$DT_TMP/svg")"

for c in $charts; do
  f="$DT_TMP/svg/$c.svg"
  xmllint --noout "$f" 2>"$DT_TMP/xmllint.err" || { cat "$DT_TMP/xmllint.err"; fail "$c.svg: xmllint finds it not well-formed"; }
  # the root element: an svg in the SVG namespace
  root=$(xmllint --xpath 'name(/*)' "$f" 2>/dev/null) || root=
  ns=$(xmllint --xpath 'namespace-uri(/*)' "$f" 2>/dev/null) || ns=
  [ "$root" = svg ] && [ "$ns" = http://www.w3.org/2000/svg ] || fail "$c.svg: the root is '$root' in '$ns', not an SVG svg element"
  pass "$c.svg: well-formed XML, an SVG root"
done

if ! command -v rsvg-convert >/dev/null 2>&1; then
  pass "rendering skipped: rsvg-convert not found (Debian: librsvg2-bin); xmllint checked all three charts"
  exit 0
fi

# png_size FILE: "WIDTH HEIGHT" from the PNG's IHDR chunk, or nothing when FILE is no PNG
png_size() {
  sig=$(od -An -tx1 -N8 "$1" | tr -d ' \n')
  [ "$sig" = 89504e470d0a1a0a ] || return 0
  od -An -tu1 -j16 -N8 "$1" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4, $5 * 16777216 + $6 * 65536 + $7 * 256 + $8 }'
}

# a blank page of the charts' size: the size a PNG of nothing drawn has
printf '<svg xmlns="http://www.w3.org/2000/svg" width="720" height="440" viewBox="0 0 720 440"><rect width="720" height="440" fill="#ffffff"/></svg>\n' >"$DT_TMP/blank.svg"
rsvg-convert -f png -o "$DT_TMP/blank.png" "$DT_TMP/blank.svg" || fail "rsvg-convert cannot render a blank page"
blank=$(wc -c <"$DT_TMP/blank.png")

for c in $charts; do
  f="$DT_TMP/svg/$c.svg"
  want=$(sed -n 's/^<svg .* width="\([0-9]*\)" height="\([0-9]*\)".*/\1 \2/p' "$f")
  [ -n "$want" ] || fail "$c.svg: no width and height on its svg element"
  rsvg-convert -f png -o "$DT_TMP/$c.png" "$f" 2>"$DT_TMP/rsvg.err" || { cat "$DT_TMP/rsvg.err"; fail "$c.svg: rsvg-convert cannot render it"; }
  [ -s "$DT_TMP/$c.png" ] || fail "$c.png: empty"
  got=$(png_size "$DT_TMP/$c.png")
  [ "$got" = "$want" ] || fail "$c.png: size '$got', the svg says '$want'"
  bytes=$(wc -c <"$DT_TMP/$c.png")
  [ "$bytes" -gt $((blank * 3)) ] || fail "$c.png: $bytes bytes, hardly more than a blank page ($blank): nothing drawn?"
  pass "$c.svg: rendered by rsvg-convert $(rsvg-convert --version | awk '{ print $NF }') to $got pixels, $bytes bytes (a blank page: $blank)"
done
