#!/usr/bin/env bash
# scripts/slurm/train.sbatch without a cluster: `bash -n`, then runs under fake srun, mpirun and
# scontrol on PATH that record their command lines. Checks the launch lines (resume auto, the
# config and overrides, the NCCL environment), the self-requeue after a signal stop, no requeue
# after a finished run, and that a SIGTERM to the batch shell reaches mpirun once.
set -u
sbatch_script=$1
source "$(dirname "$0")/../script_test_util.sh"

bash -n "$sbatch_script" || fail "bash -n $sbatch_script"
grep -q '^#SBATCH --signal=TERM@120$' "$sbatch_script" || fail "no #SBATCH --signal=TERM@120"

mkdir -p "$dir/bin"
trainer="$dir/trainer"
printf '#!/bin/sh\nexit 0\n' > "$trainer"
echo "train: {steps: 10}" > "$dir/run.yaml"
# A fake launcher: records its arguments and NCCL_DEBUG, prints $FAKE_OUTPUT; with
# FAKE_WAIT_FOR_SIGNAL it runs until a SIGUSR1 (30 s at most), recording each SIGUSR1 and
# SIGTERM it gets; a SIGTERM ends it with exit 1, as it aborts a real mpirun's job.
for launcher in srun mpirun; do
  cat > "$dir/bin/$launcher" <<'SH'
#!/usr/bin/env bash
echo "$(basename "$0") $* NCCL_DEBUG=$NCCL_DEBUG" >> "$FAKE_RECORD"
if [ -n "${FAKE_WAIT_FOR_SIGNAL:-}" ]; then
  trap 'echo USR1 >> "$FAKE_RECORD"; echo "stopped by a signal after step 3"; exit 0' USR1
  trap 'echo TERM >> "$FAKE_RECORD"; exit 1' TERM
  echo started >> "$FAKE_RECORD"
  for _ in $(seq 600); do sleep 0.05; done
  exit 1
fi
echo "${FAKE_OUTPUT:-}"
SH
done
echo 'echo "scontrol $*" >> "$FAKE_RECORD"' > "$dir/bin/scontrol"
chmod +x "$dir/bin/"* "$trainer"

# The environment Slurm gives the batch script on 2 nodes.
job_env=(PATH="$dir/bin:$PATH" TRAINER="$trainer" SLURM_JOB_ID=4242 SLURM_NNODES=2
         SLURM_NTASKS=16 SLURM_SUBMIT_DIR="$dir")
# run_job RECORD [ENV=VALUE...]: the batch script run as Slurm would, recording into RECORD.
run_job() {
  local record=$1
  shift
  env "${job_env[@]}" FAKE_RECORD="$record" "$@" \
    bash "$sbatch_script" "$dir/run.yaml" --set train.steps=20 > "$record.out" 2>&1
}

# 1. srun, the run finishes: one launch line, no requeue.
run_job "$dir/srun1" FAKE_OUTPUT="done: 20 steps" || fail "srun job: exit $?"
expected="srun --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=none $trainer train --config"
expected+=" $dir/run.yaml --resume auto --set train.steps=20 NCCL_DEBUG=WARN"
[ "$(cat "$dir/srun1")" = "$expected" ] ||
  fail "srun line: '$(cat "$dir/srun1")', expected '$expected'"
echo "srun launch: $(head -1 "$dir/srun1")"

# 2. srun, stopped by a signal with a checkpoint: the job requeues itself; NCCL_DEBUG is the
# user's when exported.
run_job "$dir/srun2" NCCL_DEBUG=INFO FAKE_OUTPUT="stopped by a signal after step 7; checkpoint" ||
  fail "stopped srun job: exit $?"
grep -q " NCCL_DEBUG=INFO$" "$dir/srun2" || fail "user NCCL_DEBUG not kept: $(cat "$dir/srun2")"
[ "$(tail -1 "$dir/srun2")" = "scontrol requeue 4242" ] ||
  fail "no requeue after a signal stop: $(cat "$dir/srun2")"
run_job "$dir/srun3" REQUEUE=0 FAKE_OUTPUT="stopped by a signal after step 7" || fail "REQUEUE=0"
! grep -q scontrol "$dir/srun3" || fail "REQUEUE=0 still requeued"
run_job "$dir/srun4" FAKE_OUTPUT="stopped by train.exit_duration_minutes 1400: 1400.3 minutes since \
the trainer started after step 9; checkpoint written to runs/ckpt" || fail "timed-out srun job"
[ "$(tail -1 "$dir/srun4")" = "scontrol requeue 4242" ] ||
  fail "no requeue after an exit_duration stop: $(cat "$dir/srun4")"
echo "signal and exit_duration stops: scontrol requeue 4242 (none with REQUEUE=0 or after a" \
  "finished run)"

# 3. mpirun: ranks from the allocation, 8 per node, NCCL variables exported to every rank.
run_job "$dir/mpirun1" LAUNCHER=mpirun NCCL_SOCKET_IFNAME=ib0 || fail "mpirun job: exit $?"
line=$(cat "$dir/mpirun1")
for piece in "mpirun -np 16 --map-by ppr:8:node --bind-to none" "-x NCCL_SOCKET_IFNAME" \
             "-x NCCL_DEBUG" "$trainer train --config $dir/run.yaml --resume auto"; do
  [[ "$line" == *"$piece"* ]] || fail "mpirun line lacks '$piece': $line"
done
echo "mpirun launch: $line"

# 4. SIGTERM to the batch shell under mpirun: forwarded once as SIGUSR1 (which mpirun forwards
# to the ranks), the job exits 0 and requeues.
touch "$dir/mpirun2"
env "${job_env[@]}" FAKE_RECORD="$dir/mpirun2" LAUNCHER=mpirun FAKE_WAIT_FOR_SIGNAL=1 \
  bash "$sbatch_script" "$dir/run.yaml" > "$dir/mpirun2.out" 2>&1 &
job=$!  # env execs bash: the batch shell itself
wait_for started "$dir/mpirun2" 100 0.05 || fail "fake mpirun did not start"
kill -TERM $job
wait $job || fail "batch script exit $? after SIGTERM"
[ "$(grep -c '^USR1$' "$dir/mpirun2")" = 1 ] && ! grep -q '^TERM$' "$dir/mpirun2" ||
  fail "SIGTERM not forwarded once as SIGUSR1: $(cat "$dir/mpirun2")"
[ "$(tail -1 "$dir/mpirun2")" = "scontrol requeue 4242" ] || fail "no requeue after SIGTERM"
echo "SIGTERM to the batch shell: forwarded to mpirun once as SIGUSR1, exit 0, requeued"

# 5. Bad input: a missing config is named, nothing launched.
env PATH="$dir/bin:$PATH" FAKE_RECORD="$dir/bad" TRAINER="$trainer" \
  bash "$sbatch_script" "$dir/missing.yaml" > "$dir/bad.out" 2>&1 && fail "missing config: exit 0"
grep -q "no config file $dir/missing.yaml" "$dir/bad.out" || fail "$(cat "$dir/bad.out")"
[ ! -e "$dir/bad" ] || fail "launched despite a missing config"
echo "PASS"
