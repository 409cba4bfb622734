# The command-line walk-through of docs/cli.md, run in the folder that holds news/ (written
# by news_folders.py): each command after a "$ " line, then what it prints, its progress
# (stderr) and its results (stdout) in the order they come.
set -e
export PYTHONUNBUFFERED=1
run() {
    echo "\$ $*"
    "$@" 2>&1
    echo
}
run stc fit news/train -o news.stc -k 10 --min-df 2 --random-state 0 -j -1
run stc topics news.stc -n 6
run stc transform news.stc news/test -o test-codes.npz --word-codes
run stc evaluate news.stc news/test -q
run stc fit news/train -o news-medstc.stc --model medstc -k 10 --min-df 2 --random-state 0 -j -1 -q
run stc evaluate news-medstc.stc news/test -q
run stc report news-medstc.stc news/test -o report.html
