"""Document identity: two files never share a doc_id, one file never gets two, pruning
stays inside the named folder, and symbolic links are followed only when asked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli.main import main
from tests.fakes import hash_kb_cli
from tools.kb.ingest.ingest_report import IngestReport
from tools.kb.ingest.loaders import FileRef
from tools.kb.knowledge_base import KnowledgeBase

POLICY_A = "# Travel policy\n\nTeam A may spend up to 5000 EUR per trip on travel.\n"
POLICY_B = "# Travel policy\n\nTeam B may spend up to 900 EUR per trip on travel.\n"


def _teams(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "teamA", tmp_path / "teamB"
    for folder, text in ((a, POLICY_A), (b, POLICY_B)):
        folder.mkdir()
        (folder / "policy.md").write_text(text)
    return a, b


def _texts(kb: KnowledgeBase) -> dict[str, str]:
    return {r.doc_id: r.text for r in kb.search("travel spend per trip EUR", k=10)}


def _both_kept(kb: KnowledgeBase) -> None:
    texts = _texts(kb)
    assert len(texts) == 2, texts
    joined = " ".join(texts.values())
    assert "5000 EUR" in joined and "900 EUR" in joined


def test_same_relative_path_in_two_folders_ingested_one_after_the_other(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    a, b = _teams(tmp_path)
    assert kb.ingest([a]).added == ["policy.md"]
    report = kb.ingest([b])
    assert report.added == ["teamB/policy.md"] and not report.updated
    _both_kept(kb)
    again = kb.ingest([a])  # re-ingesting A neither touches nor renames anything
    assert again.unchanged == ["policy.md"] and not again.deleted
    _both_kept(kb)


def test_two_folders_in_one_call_are_stable_across_runs(kb: KnowledgeBase, tmp_path: Path) -> None:
    a, b = _teams(tmp_path)
    first = kb.ingest([a, b])
    assert sorted(first.added) == ["policy.md", "teamB/policy.md"]
    for _ in range(2):
        rerun = kb.ingest([a, b])
        assert not rerun.updated and not rerun.added and not rerun.deleted
        assert sorted(rerun.unchanged) == ["policy.md", "teamB/policy.md"]
    _both_kept(kb)


def test_a_third_holder_of_the_name_gets_a_hashed_id(kb: KnowledgeBase, tmp_path: Path) -> None:
    a, b = _teams(tmp_path)
    c = tmp_path / "x" / "teamB"  # same folder name as b: the folder prefix is taken too
    c.mkdir(parents=True)
    (c / "policy.md").write_text("# Travel policy\n\nTeam C may spend 70 EUR per trip.\n")
    kb.ingest([a, b])
    added = kb.ingest([c]).added
    assert len(added) == 1 and added[0].startswith("policy.md~"), added
    assert len(_texts(kb)) == 3


def test_a_file_in_the_kb_ingested_again_by_its_path_is_not_duplicated(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    folder = tmp_path / "kbdup"
    (folder / "hr").mkdir(parents=True)
    leave = folder / "hr" / "annual-leave.md"
    leave.write_text("# Annual leave\n\nStaff get 18 days of annual leave after six years.\n")
    kb.ingest([folder])
    report = kb.ingest([leave])
    assert report.unchanged == ["hr/annual-leave.md"] and not report.added
    hits = kb.search("annual leave days", k=10)
    assert [h.doc_id for h in hits] == ["hr/annual-leave.md"]


def test_a_file_first_then_its_folder_is_one_document(kb: KnowledgeBase, tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "leave.md").write_text("# Leave\n\nStaff get 18 days of annual leave.\n")
    assert kb.ingest([folder / "hr" / "leave.md"]).added == ["leave.md"]
    report = kb.ingest([folder])
    assert report.unchanged == ["leave.md"] and not report.added and not report.deleted
    assert len(kb.search("annual leave", k=10)) == 1


def test_an_old_store_holding_one_file_twice_is_repaired(kb: KnowledgeBase, tmp_path: Path) -> None:
    # The store the former rule wrote: 'hr/leave.md' via the folder, 'leave.md' via the file.
    folder = tmp_path / "kb"
    (folder / "hr").mkdir(parents=True)
    leave = folder / "hr" / "leave.md"
    leave.write_text("# Leave\n\nStaff get 18 days of annual leave.\n")
    kb.ingest([folder])
    record = kb.registry.records()["hr/leave.md"]
    kb.ingester.ingest([FileRef(leave, "leave.md")], IngestReport(), None)
    assert {"hr/leave.md", "leave.md"} <= set(kb.registry.records())
    assert kb.registry.records()["leave.md"]["source"] == record["source"]
    assert len(kb.search("annual leave", k=10)) == 2  # the duplicate the bug produced
    repaired = kb.ingest([folder])
    assert repaired.deleted == ["leave.md"] and repaired.unchanged == ["hr/leave.md"]
    assert set(kb.registry.records()) == {"hr/leave.md"}
    assert [h.doc_id for h in kb.search("annual leave", k=10)] == ["hr/leave.md"]


def test_prune_stays_inside_the_named_folder(kb: KnowledgeBase, tmp_path: Path) -> None:
    team, team2 = tmp_path / "team", tmp_path / "team2"
    team.mkdir()
    team2.mkdir()
    (team / "a.md").write_text("# A\n\nAlpha facts about the team.\n")
    (team2 / "b.md").write_text("# B\n\nBeta facts about the second team.\n")
    kb.ingest([team, team2])
    (team / "a.md").unlink()
    (team / "c.md").write_text("# C\n\nGamma facts about the team.\n")
    report = kb.ingest([team])
    assert report.deleted == ["a.md"] and report.added == ["c.md"]
    assert "b.md" in kb.registry.records()  # /team is a prefix of /team2: untouched


def test_a_moved_file_takes_its_name_back(kb: KnowledgeBase, tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    (old / "faq.md").write_text("# FAQ\n\nThe office opens at 9 am.\n")
    kb.ingest([old])
    old.rename(new)
    report = kb.ingest([new])
    assert report.updated == ["faq.md"] or report.unchanged == ["faq.md"], report
    assert kb.registry.records()["faq.md"]["source"] == str((new / "faq.md").resolve())


def _links(tmp_path: Path) -> tuple[Path, Path]:
    folder, outside = tmp_path / "kb", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / "inside.md").write_text("# Inside\n\nThe inside document mentions apples.\n")
    secret = outside / "secret.txt"
    secret.write_text("A file outside the folder that mentions apples and passwords.\n")
    (folder / "out-link.txt").symlink_to(secret)
    (folder / "dangling.md").symlink_to(tmp_path / "missing.md")
    (folder / "loop.md").symlink_to(folder / "loop.md")
    (folder / "again.md").symlink_to(folder / "inside.md")
    (folder / "outdir").symlink_to(outside, target_is_directory=True)
    return folder, secret


def test_links_out_of_the_folder_are_skipped_with_reasons(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    folder, secret = _links(tmp_path)
    report = kb.ingest([folder])
    assert report.added == ["inside.md"]  # again.md is the same file: one document
    reasons = {Path(s.source).name: s.reason for s in report.skipped}
    assert "outside the folder: not followed" in reasons["out-link.txt"]
    assert str(secret) in reasons["out-link.txt"]
    assert "outside the folder" in reasons["outdir"]
    assert reasons["dangling.md"].startswith("dangling symbolic link")
    assert reasons["loop.md"] == "symbolic link loop"
    assert all("passwords" not in h.text for h in kb.search("apples passwords", k=10))


def test_followed_links_are_pruned_when_the_link_goes(kb: KnowledgeBase, tmp_path: Path) -> None:
    folder, _ = _links(tmp_path)
    report = kb.ingest([folder], follow_links=True)
    # the outside file is reached twice (the file link, the folder link): one document
    assert len(report.added) == 2 and "inside.md" in report.added, report.added
    (folder / "out-link.txt").unlink()
    (folder / "outdir").unlink()
    pruned = kb.ingest([folder], follow_links=True)
    assert set(pruned.deleted) == set(report.added) - {"inside.md"}, pruned
    assert set(kb.registry.records()) == {"inside.md"}


def test_cli_ingest_json_lists_skipped_links_and_follows_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    hash_kb_cli(monkeypatch)
    folder, _ = _links(tmp_path)
    home = str(tmp_path / "home")
    assert main(["--home", home, "ingest", str(folder), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    skipped = {Path(s["source"]).name: s["reason"] for s in out["skipped"]}
    assert {"out-link.txt", "dangling.md", "loop.md", "outdir"} <= set(skipped)
    assert main(["--home", home, "ingest", str(folder), "--json", "--follow-links"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "out-link.txt" in out["added"]
    assert os.path.islink(folder / "out-link.txt")


def test_folder_links_back_to_an_enclosing_folder_are_loops(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    folder, outside = tmp_path / "kb", tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    (folder / "sub" / "a.md").write_text("# A\n\nAlpha facts.\n")
    (outside / "x.md").write_text("# X\n\nXray facts.\n")
    (folder / "sub" / "back").symlink_to("..", target_is_directory=True)
    (folder / "up").symlink_to(tmp_path, target_is_directory=True)  # holds the folder itself
    (outside / "self").symlink_to(outside, target_is_directory=True)
    (folder / "out").symlink_to(outside, target_is_directory=True)
    for follow in (False, True):
        report = kb.ingest([folder], follow_links=follow)
        reasons = {s.source: s.reason for s in report.skipped}
        assert reasons[str(folder / "sub" / "back")] == f"symbolic link loop (to {folder})"
        assert reasons[str(folder / "up")] == f"symbolic link loop (to {tmp_path})"
        if follow:  # the outside folder is walked once, its own loop reported
            assert reasons[str(folder / "out" / "self")].startswith("symbolic link loop")
            assert sorted(report.added) == ["out/x.md"]
        else:
            assert "outside the folder" in reasons[str(folder / "out")]
    assert sorted(kb.registry.records()) == ["out/x.md", "sub/a.md"]


def test_a_link_named_through_a_linked_folder_is_pruned_when_it_goes(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    folder, outside = tmp_path / "kb", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / "a.md").write_text("# A\n\nAlpha facts.\n")
    (outside / "x.md").write_text("# X\n\nXray facts.\n")
    (folder / "link.md").symlink_to(outside / "x.md")
    (tmp_path / "alias").symlink_to(folder, target_is_directory=True)
    assert kb.ingest([tmp_path / "alias" / "link.md"]).added == ["link.md"]
    assert kb.registry.records()["link.md"]["via"] == str(folder / "link.md")
    (folder / "link.md").unlink()
    report = kb.ingest([tmp_path / "alias"])
    assert report.deleted == ["link.md"] and report.added == ["a.md"]


def _file_and_link(tmp_path: Path) -> tuple[Path, Path]:
    """``own/a.md`` and ``other/link.md`` pointing at it."""
    own, other = tmp_path / "own", tmp_path / "other"
    own.mkdir()
    other.mkdir()
    (own / "a.md").write_text("# A\n\nAlpha facts about leave.\n")
    (other / "link.md").symlink_to(own / "a.md")
    return own, other


def test_a_file_reached_by_its_folder_and_by_a_link_is_never_re_embedded(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    # Regression: alternating the two routes reported "updated" and embedded the file
    # again each time; its own folder now owns it, whatever the order.
    own, other = _file_and_link(tmp_path)
    emb = kb.model.embeddings
    assert kb.ingest([own]).added == ["a.md"]
    embedded = emb.texts_embedded  # type: ignore[attr-defined]
    for folder in (other, own, other):
        report = kb.ingest([folder], follow_links=True)
        assert report.unchanged == ["a.md"] and not report.updated and not report.added
    assert emb.texts_embedded == embedded  # type: ignore[attr-defined]
    assert kb.registry.records()["a.md"]["via"] == ""  # owned by its folder
    (other / "link.md").unlink()
    assert kb.ingest([other], follow_links=True).deleted == []  # the link's folder: not its


def test_a_file_first_reached_by_a_link_is_owned_by_its_folder_once_ingested_there(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    own, other = _file_and_link(tmp_path)
    assert kb.ingest([other], follow_links=True).added == ["link.md"]
    assert kb.registry.records()["link.md"]["via"] == str(other / "link.md")
    (own / "a.md").write_text("# A\n\nAlpha facts about leave, revised.\n")
    assert kb.ingest([own]).updated == ["link.md"]  # changed, and now reached directly
    # Regression: the commit left the old "via" (an upsert keeps keys it is not given),
    # so removing the link pruned a file its own folder still holds.
    assert kb.registry.records()["link.md"]["via"] == ""
    (other / "link.md").unlink()
    assert kb.ingest([other], follow_links=True).deleted == []
    assert kb.stats()["documents"] == 1


def test_an_unchanged_file_first_reached_by_a_link_moves_to_its_folder_without_embedding(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    own, other = _file_and_link(tmp_path)
    assert kb.ingest([other], follow_links=True).added == ["link.md"]
    embedded = kb.model.embeddings.texts_embedded  # type: ignore[attr-defined]
    assert kb.ingest([own]).unchanged == ["link.md"]
    assert kb.model.embeddings.texts_embedded == embedded  # type: ignore[attr-defined]
    assert kb.registry.records()["link.md"]["via"] == ""  # its folder owns it now
    (other / "link.md").unlink()
    assert kb.ingest([other], follow_links=True).deleted == []
    assert kb.stats()["documents"] == 1


def test_the_demo_drops_the_sample_of_another_checkout(kb: KnowledgeBase, tmp_path: Path) -> None:
    # Two checkouts' samples are two sets of documents ("hr/leave.md" and
    # "kb/hr/leave.md"): the demo of the second answered from both, citing each twice.
    from tools.kb.ingest.identity import copies_elsewhere

    first, second = tmp_path / "a" / "kb", tmp_path / "b" / "kb"
    for root in (first, second):
        (root / "hr").mkdir(parents=True)
        (root / "hr" / "leave.md").write_text("# Leave\n\n18 days after 6 years.\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "leave.md").write_text("# Leave\n\nAnother team's leave rules.\n")
    kb.ingest([first])
    kb.ingest([tmp_path / "other"])
    assert copies_elsewhere(second, kb.registry.records()) == ["hr/leave.md"]
    assert copies_elsewhere(first, kb.registry.records()) == []  # its own files: kept
    kb.delete("hr/leave.md")
    kb.ingest([second])
    assert "hr/leave.md" in kb.registry.records()  # the plain name again, not kb/hr/...
    assert copies_elsewhere(second, kb.registry.records()) == []
