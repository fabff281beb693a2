#!/bin/sh
# resample.sh: PIL as the oracle of our resampling, every filter of torchvision's --interpolation
# (nearest, bilinear, bicubic, box, hamming, lanczos): tests/data/resample_pil.py gives the same
# inputs, boxes and sizes to tests/data/resample_check (the resampler, dt_image_resize and the JPEG
# box decode, RGB and gray) and to PIL's Image.resize, and wants the same pixels, exactly; and each
# filter's DCT-scaled fast path no further from PIL's full-size pixels than bilinear's.
. "$top_srcdir/tests/common.sh"
py=
for c in ${DT_PYTHON_TORCH:-} /usr/bin/python3 python3; do
  if "$c" -c 'import numpy, PIL' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || skip "no Python with numpy and PIL (Debian: python3-numpy python3-pil)"
# a real photo when there is one (Debian's python-matplotlib-data); a synthetic pattern otherwise
photo=/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg
[ -f "$photo" ] || echo "no $photo (Debian: python-matplotlib-data): the pattern stands in for the photo"
set +e
"$py" "$top_srcdir/tests/data/resample_pil.py" "$top_builddir/tests/data/resample_check" "$DT_TMP" "$photo"
st=$?
set -e
[ "$st" -eq 77 ] && skip "resample_pil.py could not import numpy or PIL"
[ "$st" -eq 0 ] || fail "our resampling differs from PIL's (above)"
pass "every filter pixel for pixel as PIL"
