"""What commands write stays where it is asked to go: no file is written through a symbolic link (or into a FIFO
or a hard-linked file) planted in an output folder, every task has a file name of its own, and names read from a
results file cannot break the report's Markdown."""
import json
import os
import re

import pytest

from placement_env import harness
from placement_env.cli import main
from placement_env.errors import OutputPathError
from placement_env.harness import run_suite
from placement_env.harness.leaderboard import leaderboard_table
from placement_env.output_paths import OutputFolder, file_name_part, write_output_file


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    path = tmp_path_factory.mktemp("safety") / "results.jsonl"
    run_suite("tiny", ["single_gpu"], path, budget=0, progress=False)
    return path


@pytest.fixture()
def elsewhere(tmp_path):
    """A folder outside the output folder, with a file that must stay as it is."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep")
    return folder


def assert_untouched(elsewhere):
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]
    assert (elsewhere / "keep.txt").read_text() == "keep"


def one_line_error(capsys):
    err = capsys.readouterr().err
    assert err.startswith("placement-env: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("name", ["report.md", "bars.png", "gantt-rnnlm-tiny-2gpu.png"])
@pytest.mark.parametrize("target", ["keep.txt", "new.txt"])
def test_report_refuses_a_link_planted_in_its_folder(results, tmp_path, elsewhere, capsys, name, target):
    out = tmp_path / "report"
    out.mkdir()
    (out / name).symlink_to(elsewhere / target)
    with pytest.raises(OutputPathError, match=re.escape(f"{out / name} is a symbolic link (to {elsewhere / target}); "
                                                        "nothing is written through a link")):
        harness.write_report(results, out)
    assert main(["report", str(results), "-o", str(out)]) == 2
    assert f"{out / name} is a symbolic link" in one_line_error(capsys)
    assert_untouched(elsewhere)
    assert (out / name).is_symlink()


def test_report_refuses_an_output_folder_that_is_a_link(results, tmp_path, elsewhere, capsys):
    out = tmp_path / "report"
    out.symlink_to(elsewhere, target_is_directory=True)
    assert main(["report", str(results), "-o", str(out)]) == 2
    assert f"argument -o/--out-dir: {out} is a symbolic link (to {elsewhere})" in one_line_error(capsys)
    with pytest.raises(OutputPathError, match=f"{re.escape(str(out))} is a symbolic link"):
        harness.write_report(results, out, gantt=False)
    assert_untouched(elsewhere)


def test_a_fifo_or_a_hard_linked_file_in_the_output_folder_is_refused(results, tmp_path, elsewhere):
    out = tmp_path / "report"
    out.mkdir()
    os.mkfifo(out / "bars.png")  # opening it to write would wait for a reader forever
    with pytest.raises(OutputPathError, match=f"{re.escape(str(out / 'bars.png'))} is not a regular file"):
        harness.write_report(results, out, gantt=False)
    os.unlink(out / "bars.png")
    os.link(elsewhere / "keep.txt", out / "bars.png")
    with pytest.raises(OutputPathError, match="bars.png has 1 other hard link\\(s\\), which would change too"):
        harness.write_report(results, out, gantt=False)
    assert_untouched(elsewhere)
    with OutputFolder(out) as folder, pytest.raises(OutputPathError, match="'../x' is not a file name"):
        folder.write("../x", b"")


def test_results_files_pictures_and_clusters_are_not_written_through_a_link(tmp_path, elsewhere, capsys):
    link = tmp_path / "r.jsonl"
    link.symlink_to(elsewhere / "keep.txt")
    assert main(["run", "--suite", "tiny", "--methods", "single_gpu", "-o", str(link)]) == 2
    assert f"argument -o/--results: {link} is a symbolic link" in one_line_error(capsys)
    with pytest.raises(OutputPathError, match=f"{re.escape(str(link))} is a symbolic link"):
        run_suite("tiny", ["single_gpu"], link, progress=False)  # the API, with no flag check before it
    lock = tmp_path / "s.jsonl.lock"
    lock.symlink_to(elsewhere / "lock")
    with pytest.raises(OutputPathError, match=f"{re.escape(str(lock))} is a symbolic link"):
        run_suite("tiny", ["single_gpu"], tmp_path / "s.jsonl", progress=False)
    picture = tmp_path / "c.png"
    picture.symlink_to(elsewhere / "c.png")
    assert main(["cluster", "paper-2gpu", "--plot", str(picture)]) == 2
    assert f"argument --plot: {picture} is a symbolic link" in one_line_error(capsys)
    from placement_env import load_cluster
    from placement_env.render.topology import save_cluster_picture

    with pytest.raises(OutputPathError, match=f"{re.escape(str(picture))} is a symbolic link"):
        save_cluster_picture(load_cluster("paper-2gpu"), picture)
    with pytest.raises(OutputPathError, match=f"{re.escape(str(picture))} is a symbolic link"):
        write_output_file(picture, b"x")
    assert main(["calibrate", "rnnlm-tiny", "-o", str(picture)]) == 2  # refused before any worker starts
    assert f"argument -o/--output: {picture} is a symbolic link" in one_line_error(capsys)
    assert_untouched(elsewhere)


def _with_tasks(results, tmp_path, tasks, method="single_gpu"):
    """A results file of the first row of ``results`` once per task name."""
    row = json.loads(results.read_text().splitlines()[0])
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({**row, "task": task, "method": method}) + "\n" for task in tasks))
    return path


def test_tasks_whose_names_make_alike_file_names_each_get_their_own_chart(results, tmp_path):
    tasks = ["x/y", "x_y", "X_y", "x~2fy", ".x_y"]
    out = tmp_path / "report"
    markdown = harness.write_report(_with_tasks(results, tmp_path, tasks), out).read_text()
    charts = sorted(p.name for p in out.glob("gantt-*.png"))
    assert len(charts) == len(tasks) == len({name.lower() for name in charts})
    for task in tasks:
        assert f"(gantt-{file_name_part(task)}.png)" in markdown
    assert {p.name for p in tmp_path.rglob("*") if p.is_file() and p.parent != out} == {"tasks.jsonl"}


def _cells(line):
    """The cells of a Markdown table line, split at the pipes no backslash escapes."""
    return re.split(r"(?<!\\)\|", line)[1:-1]


def test_names_from_a_results_file_cannot_break_the_report_markdown(results, tmp_path):
    hostile = "a|b\n| injected | row |\r\\`code`[link](x)<b>"
    path = _with_tasks(results, tmp_path, [hostile, "plain"], method="m|x\n|y")
    rows = harness.read_rows(path)
    for table in (harness.markdown_table(rows), leaderboard_table(rows)):
        lines = table.splitlines()
        assert len(lines) == 2 + 2  # header, rule, one line per task
        assert len({len(_cells(line)) for line in lines}) == 1, table
        assert "a\\|b \\| injected \\| row \\| \\\\\\`code\\`\\[link\\](x)\\<b\\>" in lines[2]
    markdown = harness.write_report(path, tmp_path / "report").read_text()
    headings = [line for line in markdown.splitlines() if line.startswith("#")]
    assert len(headings) == 3 and "injected" in headings[1]  # the title and one heading per Gantt chart
