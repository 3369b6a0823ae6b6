"""Write the sample knowledge base's PDF and Word documents (examples/kb).

    .venv/bin/python examples/make_samples.py     # needs the dev extra (reportlab)

* ``kb/facilities/warehouse-safety-handbook.pdf`` — English, four pages with an outline
  (bookmarks) and a ruled table on page 3: what ``hybrid-rag ingest`` reads from a PDF
  (pages, headings from the outline, the table as a Markdown table).
* ``kb/admin/meeting-rooms-zh.docx`` — Chinese, heading styles, a bullet list and a table.

The files are committed; rerun this script after editing the content below. The text is
fictional, like everything in examples/kb (see examples/README.md). The output is
reproducible: the same content gives the same bytes (no timestamps, no random ids), so a
rerun does not change the documents' versions in a knowledge base.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.docgen import write_docx, write_pdf  # noqa: E402

KB = REPO / "examples" / "kb"

HANDBOOK: list[list[tuple[str, Any]]] = [
    [
        ("h1", "Suzhou warehouse safety handbook"),
        (
            "p",
            "This handbook applies to everyone who works in or visits the Northwind Robotics "
            "warehouse in Suzhou: employees, contractors, drivers and visitors. It describes the "
            "rules that keep people, robots and goods safe. Supervisors explain it to every new "
            "colleague on the first day, and everyone confirms once a year that they have read "
            "the current edition. The warehouse manager owns this handbook and reviews it every "
            "January.",
        ),
        ("h2", "Personal protective equipment"),
        (
            "p",
            "Safety shoes with steel toe caps and a high-visibility vest are required everywhere "
            "beyond the yellow line of the goods-in area. Cut-resistant gloves are required when "
            "opening crates or handling strapping. Visitors receive a vest and overshoes at the "
            "reception desk and are accompanied by a Northwind employee at all times.",
        ),
    ],
    [
        ("h1", "Traffic: forklifts, robots and pedestrians"),
        (
            "p",
            "Forklifts, NR-200 Porter robots and pedestrians share the main aisles, so the "
            "warehouse is divided into marked zones. Pedestrians use the green walkways and cross "
            "the main aisles only at the zebra crossings. The speed limit for forklifts is 8 km/h "
            "in the main aisles and 4 km/h in the loading bays. Robots slow down automatically "
            "near crossings; never step in front of a moving robot to stop it, use the emergency "
            "stop button on its side instead.",
        ),
        (
            "p",
            "Only employees with a valid Northwind forklift licence may drive a forklift. The "
            "licence is renewed every two years after a practical test with the shift leader.",
        ),
    ],
    [
        ("h1", "Fire safety"),
        (
            "p",
            "When the fire alarm sounds, stop work, leave by the nearest marked exit and go to "
            "the assembly point in the staff car park at Gate C. Do not use the goods lifts and "
            "do not go back for personal belongings. Shift leaders take the attendance list to "
            "the assembly point and report missing people to the fire wardens. Fire evacuation "
            "drills take place twice a year, in April and October.",
        ),
        ("h2", "Inspection intervals"),
        (
            "table",
            [
                ["Equipment", "Inspection interval", "Responsible"],
                ["Fire extinguishers", "every month", "Fire wardens"],
                ["Sprinkler system", "every 6 months", "Facilities contractor"],
                ["Emergency lighting", "every 3 months", "Facilities team"],
                ["Racking", "every 12 months", "Warehouse manager"],
            ],
        ),
    ],
    [
        ("h1", "Reporting accidents and near misses"),
        (
            "p",
            "Every accident, injury or near miss is reported to the shift leader before the end "
            "of the shift and entered in the EHS portal within 24 hours. First aid kits hang next "
            "to every exit, and the first aiders of each shift are listed on the notice board at "
            "the entrance. For an emergency call the site security desk on extension 2222; they "
            "call the ambulance or fire brigade and guide them to the right gate.",
        ),
    ],
]

MEETING_ROOMS: list[tuple[str, Any]] = [
    ("h1", "预订规则"),
    (
        "p",
        "苏州总部的会议室统一通过公司门户的“会议室预订”页面预订，最多可提前30天预订，"
        "单次预订时长不超过4小时。会议取消时须在开始前2小时取消预订，连续三次预订后未使用的，"
        "系统将暂停其预订权限两周。",
    ),
    ("h1", "会议室一览"),
    (
        "table",
        [
            ["会议室", "楼层", "容纳人数", "设备"],
            ["太湖厅", "B栋5楼", "40人", "投影仪、视频会议系统、无线麦克风"],
            ["金鸡湖", "B栋3楼", "12人", "电视屏幕、视频会议系统"],
            ["独墅湖", "B栋3楼", "6人", "电视屏幕"],
            ["阳澄湖", "A栋2楼", "20人", "投影仪、白板"],
        ],
    ),
    ("h1", "使用须知"),
    (
        "list",
        [
            "会议结束后请关闭投影仪和空调，并将桌椅恢复原位。",
            "视频会议设备出现故障时，请拨打IT服务台分机8100。",
            "太湖厅用于客户接待时享有优先权，内部会议可能被调整到其他会议室。",
        ],
    ),
]


def main() -> None:
    for folder in ("facilities", "admin"):
        (KB / folder).mkdir(parents=True, exist_ok=True)
    pdf = write_pdf(KB / "facilities" / "warehouse-safety-handbook.pdf", HANDBOOK)
    docx = write_docx(KB / "admin" / "meeting-rooms-zh.docx", MEETING_ROOMS, title="会议室管理规定")
    for path in (pdf, docx):
        print(f"wrote {path.relative_to(REPO)} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
