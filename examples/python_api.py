import matplotlib.pyplot as plt

from tailmem import api


def main():
    view = api.run("knowledge-qa", preset="smoke", out="runs/qa-smoke")  # later: api.load(...)
    print(view.experiment, view.preset, len(view.claims), "claims")
    claim = view.claim("A3.plain.tail_muon_vs_adam")
    print(claim.verdict, "|", claim.ours)
    for answer in view.answers:
        print(answer.question, "->", answer.answer, f"[{answer.verdict}]")

    # The rarest groups' first-token accuracy at the end of training, per arm.
    rows = [r for r in view.rows("tail_table_long.csv") if r["fraction"] == 1.0]
    for arm in sorted({r["arm"] for r in rows}):
        mine = [r for r in rows if r["arm"] == arm]
        plt.errorbar([r["group"] for r in mine], [r["mean"] for r in mine],
                     yerr=[r["se"] or 0.0 for r in mine], marker="o", label=arm)
    plt.xlabel("frequency group (the rarest last)")
    plt.ylabel("first-token accuracy at the end")
    plt.legend()
    plt.savefig("runs/qa-smoke-tail.png")

    runs = view.sub_runs()  # folder -> RunResult
    print(len(runs), "training runs; first:", next(iter(runs)))


if __name__ == "__main__":  # a run's worker processes import this file again: run it once
    main()
