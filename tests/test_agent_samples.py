import pytest


def test_agent_samples_prints_a_row_per_window_and_the_answer(capsys):
    """The experiment runs a method as the harness does and tabulates its evaluations: random search on a tiny task,
    30 evaluations in windows of 10 (every placement fits there, all three devices drawn)."""
    from experiments.agent_samples import main as samples

    assert samples(["--suite", "tiny", "--task", "rnnlm-tiny-2gpu", "--method", "random_search", "--budget", "30",
                    "--window", "10", "--seed", "0"]) == 0
    printed = capsys.readouterr().out
    rows = [line.split("|")[1:-1] for line in printed.splitlines() if line.startswith("| ") and "-" in line[2:6]]
    assert [r[0].strip() for r in rows] == ["1-10", "11-20", "21-30"]
    assert all(r[1].strip() == "100%" for r in rows)
    fastest = min(float(r[2]) for r in rows)
    groups = [sum(float(g) for g in r[3].split("/")) for r in rows]
    assert all(g == pytest.approx(groups[0]) for g in groups)  # every placement places every group
    assert f"answer: {fastest:.1f} ms" in printed  # random search answers the fastest it evaluated


def test_agent_samples_names_the_tasks_of_the_suite(capsys):
    from experiments.agent_samples import main as samples

    with pytest.raises(SystemExit, match="task 'nope' is not in suite 'tiny'; its tasks: rnnlm-tiny-2gpu"):
        samples(["--suite", "tiny", "--task", "nope"])
