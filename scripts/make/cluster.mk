# ---- golden jobs on the engines users run them on (docs/certify.md, "Long runs")
#
#   make check-slurm     starts a one-node Slurm cluster here (munged,
#                        slurmctld, slurmd; everything under a temporary
#                        directory, stopped and removed at the end), submits
#                        the job array and the merge job of docs/certify.md as
#                        the page writes them, and checks the merged case byte
#                        for byte against the unsharded run and certifies the
#                        reference on it; then kills one task of a fresh
#                        run midway, and the same block submitted again must
#                        keep the seven parts there and finish the case
#                        (scripts/check-slurm.sh; installs slurm-wlm and
#                        munge if missing; as root; about 85 s)
#   make check-parallel  the GNU parallel recipe of docs/certify.md, 4 shards
#                        two at a time, merged, checked the same way
#                        (scripts/check-parallel.sh; installs parallel if
#                        missing); then one part lost and one truncated, the
#                        block run again as it stands (about 15 s)
.PHONY: check-slurm check-parallel

check-slurm: $(CLI)
	sh scripts/check-slurm.sh $(CLI) $(BUILD)/slurm

check-parallel: $(CLI)
	sh scripts/check-parallel.sh $(CLI) $(BUILD)/parallel
