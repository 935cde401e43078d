"""What corpus_benchmark (scripts/common.sh) hands a benchmark's Python program: the repo root,
the trainer binary, the scratch folder holding the corpus `data`, the steps of each run, how many
times each configuration runs (reps), and the mpirun flags of this machine."""
import sys

root, trainer, work = sys.argv[1], sys.argv[2], sys.argv[3]
steps, reps = int(sys.argv[4]), int(sys.argv[5])
mpirun_flags = sys.argv[6].split()
