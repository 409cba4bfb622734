#!/usr/bin/env bash
# Check a built wheel the way a user without a C compiler gets it:  tools/check_wheel.sh WHEEL
#
# 1. A fresh venv where no compiler can be found (CC=false CXX=false, and a PATH that
#    links every command of the caller's PATH except the C/C++ compilers); pip installs the
#    wheel and, as binary wheels only, its dependencies from the registry.
# 2. From a temporary directory (no source tree on sys.path): `stc --version`, the demo,
#    OpenMP on, then the test suite against the installed package. The tests are copied
#    with the repository files they read (README and the files it links to, .ci/run, docs
#    pages, examples, the pictures and the script that makes them, benchmark scripts).
# 3. A second venv with the oldest numpy, scipy and scikit-learn the wheel's metadata
#    allows (its lower bounds, pinned): the estimator, coding and loss tests.
set -euo pipefail
wheel=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir "$work/bin"
IFS=: read -ra dirs <<< "$PATH"
for dir in "${dirs[@]}"; do
    for command in "$dir"/*; do
        name=${command##*/}
        case "$name" in
            cc | c++ | c89* | c99* | cpp* | *gcc* | *g++* | *clang* | nvcc) continue ;;
        esac
        if [ -x "$command" ] && [ ! -e "$work/bin/$name" ]; then
            ln -s "$command" "$work/bin/$name"
        fi
    done
done

python3 -m venv "$work/venv"
export PATH="$work/venv/bin:$work/bin" CC=false CXX=false PIP_ONLY_BINARY=:all:
python - <<'EOF'
import shutil
found = [c for c in ("cc", "gcc", "c++", "g++", "clang") if shutil.which(c)]
assert not found, f"a compiler is on PATH: {found}"
EOF
python -m pip install -q --upgrade pip
# the license travels in the wheel (PEP 639: .dist-info/licenses/)
python - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "no LICENSE in the wheel"
EOF
start=$SECONDS
python -m pip install -q "$wheel"
echo "check_wheel: pip install of the wheel and its dependencies took $((SECONDS - start)) s"

mkdir "$work/run" && cd "$work/run"
stc --version
python -m stc --max-iter 5
python -c "import stc; assert stc.openmp_enabled(), 'the wheel runs without OpenMP'"

python -m pip install -q "$wheel[test]"
cp -r "$root/tests" .
mkdir docs benchmarks
mkdir .ci && cp "$root/.ci/run" .ci/ && cp "$root/README.md" "$root/CHANGELOG.md" .
cp "$root"/docs/*.md "$root/docs/make_images.py" docs/
cp -r "$root/docs/examples" "$root/docs/images" "$root/docs/reproduction" docs/
cp "$root"/benchmarks/*.py "$root"/benchmarks/*.md benchmarks/
# conftest.py's report header names the stc the run imports: it must be the installed one.
# -W error: as the checkout's pytest configuration (pyproject.toml), a warning fails the run
python -m pytest -p no:cacheprovider -ra -W error tests 2>&1 | tee "$work/pytest.log"
grep -q "^stc .* from $work/venv/lib/.*/site-packages/stc" "$work/pytest.log"

# The oldest dependencies: each `name>=low` of the wheel's requirements pinned at `low`.
pins=$(python - <<'EOF'
from importlib.metadata import requires
runtime = [r.replace(" ", "") for r in requires("sparse-topical-coding") if "extra" not in r]
print(" ".join(r.replace(">=", "==") for r in runtime if ">=" in r))
EOF
)
echo "check_wheel: oldest supported dependencies: $pins"
python3 -m venv "$work/oldest"
"$work/oldest/bin/python" -m pip install -q --upgrade pip
# shellcheck disable=SC2086  # $pins is a list of requirements
"$work/oldest/bin/python" -m pip install -q "$wheel" $pins pytest "hypothesis>=6.80"
"$work/oldest/bin/python" -m pip list 2>/dev/null | grep -iE "^(numpy|scipy|scikit-learn) "
"$work/oldest/bin/python" -m pytest -p no:cacheprovider -q tests/test_coding.py \
    tests/test_estimator.py tests/test_losses.py tests/test_medstc.py tests/test_persistence.py
