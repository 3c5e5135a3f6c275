"""Chinese for the offline generator: reading a Chinese scenario, and rendering a composed task's
request and reference answer in Chinese.

Contract:

* :func:`is_chinese` — whether a text is Chinese (any CJK ideograph); :func:`is_zh` — whether a
  slot's language is Chinese (``zh``, ``zh-cn``, ``zh-hans`` ...).
* Reading: :func:`read_scenario_zh` maps a Chinese scenario to the same :class:`Part` tuple the
  English reader gives (:mod:`~coworkenv.synth.procedural.scenario`), with details normalised to
  the English forms the recipe reads ("72 hours", "USD 5,000", tier and status values as the
  records hold them), so one recipe serves both languages.
* Rendering: the composer builds its request from English clauses (the source of truth; English
  tasks are unchanged byte for byte); for a Chinese slot each clause is rendered by
  :func:`render_clause` and the selection clause by :func:`render_find`. Every rule is a full
  match on one clause shape; a clause with no rule raises :class:`ZhMissing` naming it, and the slot
  is refused with that reason rather than mixing languages. Record data (titles, notes, ids, the
  services' field values) stays as the records hold it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from coworkenv.synth.procedural.scenario import (
    CROSS_CONDS,
    NAME,
    TIERS,
    Part,
    admit_write,
    owner_name,
)


class ZhMissing(ValueError):
    """A clause the Chinese rendering has no rule for."""


def is_chinese(text: str) -> bool:
    return re.search(r"[\u4e00-\u9fff]", text) is not None


def is_zh(language: str) -> bool:
    return language.lower().replace("_", "-").split("-")[0] == "zh"


# ---------------------------------------------------------------- reading

DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
NUM = r"(?:\d+|[一二两三四五六七八九十]+|半)"
UNIT = r"(?:个?小时|天|日|周|个?星期|个?月|年)"
UNIT_EN = {
    "小时": "hour",
    "天": "day",
    "日": "day",
    "周": "week",
    "星期": "week",
    "月": "month",
    "年": "year",
}


def zh_number(text: str) -> int:
    """``"72"`` → 72, ``"三"`` → 3, ``"十二"`` → 12, ``"二十"`` → 20, ``"两"`` → 2."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (DIGITS.get(tens, 1) if tens else 1) * 10 + (DIGITS.get(ones, 0) if ones else 0)
    return DIGITS.get(text, 1)


def zh_duration(text: str) -> str:
    """The first duration in ``text`` in the English reader's form ("72 hours", "2 weeks")."""
    m = re.search(rf"({NUM})\s*({UNIT})", text)
    if m is None:
        return ""
    if m.group(1) == "半":
        return "180 days" if "年" in m.group(2) else ""
    n = zh_number(m.group(1))
    unit = UNIT_EN[m.group(2).removeprefix("个")]
    return f"{n} {unit}{'s' if n != 1 else ''}"


NOUNS_ZH: tuple[tuple[str, str], ...] = (
    ("客户会议", "calendar"),
    ("客户邮件", "gmail"),
    ("通话记录", "notes"),
    ("会议记录", "notes"),
    ("知识库文章", "kb"),
    ("备份任务", "scheduler"),
    ("工单", "helpdesk"),
    ("发票", "finance"),
    ("扣款", "finance"),
    ("付款", "finance"),
    ("账单", "finance"),
    ("收费", "finance"),
    ("交易", "finance"),
    ("银行", "finance"),
    ("供应商", "finance"),
    ("集成", "config"),
    ("凭证", "config"),
    ("定时任务", "scheduler"),
    ("作业", "scheduler"),
    ("文章", "kb"),
    ("客户", "crm"),
    ("账户", "crm"),
    ("产品", "inventory"),
    ("库存", "inventory"),
    ("新闻", "rss"),
    ("资讯", "rss"),
)
WEAK_NOUNS_ZH: tuple[tuple[str, str], ...] = (
    ("待办", "todo"),
    ("会议", "calendar"),
    ("日程", "calendar"),
    ("邮件", "gmail"),
    ("笔记", "notes"),
    ("文档", "documents"),
)
CONDS_ZH: tuple[tuple[str, str], ...] = (
    (
        rf"超过\s*{NUM}\s*{UNIT}|{NUM}\s*{UNIT}以上|逾期|未更新|没有更新|未联系|没有联系|未运行|没有运行|未回复"
        rf"|没人回复|{NUM}\s*{UNIT}前|仍未关闭|未验证|没有验证|开启\s*{NUM}\s*{UNIT}|已开\s*{NUM}\s*{UNIT}",
        "age",
    ),
    (rf"未来\s*{NUM}\s*{UNIT}|接下来\s*{NUM}\s*{UNIT}|{NUM}\s*{UNIT}内到期|即将到期|即将开始", "upcoming"),
    (rf"最近\s*{NUM}\s*{UNIT}|过去\s*{NUM}\s*{UNIT}|近\s*{NUM}\s*{UNIT}", "recent"),
    (
        r"金额(?:超过|高于|大于|低于|少于|在)|\$\s?\d|\d\s*美元|最低库存|库存低于|低于.{0,6}阈值|年营收",
        "amount",
    ),
    (r"紧急|严重|高优先级|低优先级|优先级|失败|有风险|风险|错误|警告", "status"),
    (r"(?<!重新)分配给|负责人|创建的|由\s*\S+?\s*创建|组织的|参加|撰写|拥有", "owner"),
)
CROSS_ZH: dict[str, str] = {
    "duplicate": r"重复|两次|同一金额|相同金额",
    "absence": r"休假|请假|不在办公室|外出",
    "no_match": r"没有对应|没有匹配|缺少对应|没有相关",
    "tier": r"企业级|高级|白金|金牌|等级|enterprise|premium|platinum|gold",
    "recurring": r"每月|周期性|订阅",
}
TIER_ZH = {"企业级": "enterprise", "高级": "premium", "白金": "platinum", "金牌": "gold"}
STATUS_ZH = (
    ("低优先级", "low"),
    ("高优先级", "high"),
    ("紧急", "critical"),
    ("严重", "critical"),
    ("有风险", "at_risk"),
    ("风险", "at_risk"),
    ("失败", "failed"),
    ("警告", "warning"),
    ("错误", "error"),
)
WRITES_ZH: tuple[tuple[str, str, str], ...] = (
    (r"草稿|起草", "gmail", "draft"),
    (r"回复", "@reply", "reply"),
    (r"发邮件|发送邮件|发一封邮件|邮件通知|邮件告知|通知|提醒|发给|发送给", "gmail", "send"),
    (r"(?:创建|添加|新建|建)(?:一个|一条)?(?:跟进)?待办", "todo", "create"),
    (r"(?:创建|开|提交|新建)(?:一个|一张)?工单", "helpdesk", "create"),
    (r"重新分配|转派|改派|转给", "@anchor", "reassign"),
    (r"打上?标签|加上?标签|标记为", "@anchor", "tag"),
    (r"关闭|解决掉", "@anchor", "close"),
    (r"取消", "@anchor", "delete"),
    (r"重新运行|重跑|触发(?:一次)?运行", "@anchor", "run"),
    (r"预约|预订|安排(?:一次|一个)?会议", "calendar", "create"),
    (r"禁用|暂停|停用", "@anchor", "disable"),
    (r"报告", "finance", "report"),
    (r"退款", "finance", "refund"),
    (r"备注|记录一条", "crm", "note"),
    (r"(?:通过|用)(?:公司)?通讯录.{0,12}(?:发消息|发送消息)|发消息给", "contacts", "send"),
    (r"分享|共享", "notes", "share"),
    (r"发布|简报", "rss", "publish"),
    (r"汇总文档|总结文档|写一份(?:\S{0,6})?文档", "documents", "create"),
    (r"下单|补货|订购", "inventory", "order"),
    (r"追加", "@anchor", "update"),
    (r"更新|改为处理中|移到处理中|设为处理中|升级处理", "@anchor", "update"),
)
SERVICE_WORDS_ZH: tuple[tuple[str, str], ...] = (
    (r"CRM|crm|客户关系", "crm"),
    (r"通讯录|联系人|公司目录", "contacts"),
    (r"日历|日程", "calendar"),
    (r"知识库", "kb"),
    (r"笔记|记录", "notes"),
    (r"文档|政策", "documents"),
    (r"服务台|工单", "helpdesk"),
    (r"财务|发票|账单", "finance"),
    (r"定时任务|调度", "scheduler"),
    (r"配置|集成", "config"),
    (r"库存", "inventory"),
    (r"新闻|资讯|订阅源", "rss"),
    (r"邮件|收件箱", "gmail"),
    (r"待办", "todo"),
)
FORBID_ZH = re.compile(
    r"(?:不要|不得|禁止|切勿|别|不能)\s*(?:\S{0,2}?)"
    r"(发送|导出|删除|关闭|付款|分享|发布|禁用|修改|更改|退款|转发|取消|下单|回复|运行)"
)
FORBID_VERBS = {
    "发送": "send",
    "导出": "export",
    "删除": "delete",
    "关闭": "close",
    "付款": "pay",
    "分享": "share",
    "发布": "publish",
    "禁用": "disable",
    "修改": "change",
    "更改": "change",
    "退款": "refund",
    "转发": "forward",
    "取消": "cancel",
    "下单": "order",
    "回复": "reply",
    "运行": "run",
}
FIND_ZH = re.compile(r"找出|列出|查找|找到|筛选|检查|查看")
ADDRESS = re.compile(r"[a-z0-9][a-z0-9._+-]*@[a-z0-9-]+(?:\.[a-z0-9-]+)+", re.IGNORECASE)


def _first(text: str, table: Sequence[tuple[str, str]]) -> tuple[int, str] | None:
    hits = [(text.find(w), svc) for w, svc in table if w in text]
    return min(hits) if hits else None


def _last(text: str, table: Sequence[tuple[str, str]]) -> tuple[int, str] | None:
    """The record noun that ends last in ``text`` (the longer one where two end together)."""
    hits = [(text.rfind(w) + len(w), len(w), text.rfind(w), svc) for w, svc in table if w in text]
    if not hits:
        return None
    _, _, at, svc = max(hits)
    return at, svc


def _span(text: str, m: re.Match[str], pad: int = 12) -> str:
    return text[max(0, m.start() - pad) : m.end() + pad].strip()


def _zh_conditions(text: str) -> list[Part]:
    out: list[Part] = []
    for rx, kind in CONDS_ZH:
        m = re.search(rx, text)
        if m is None:
            continue
        detail = ""
        if kind in ("age", "upcoming", "recent"):
            detail = zh_duration(text[max(0, m.start() - 8) : m.end() + 12])
        elif kind == "amount":
            a = re.search(r"(?:\$|美元)?\s?(\d[\d,]*)\s*(万|k)?\s*(?:美元)?", text[m.start() : m.end() + 16])
            if (
                a is not None
                and (a.group(2) or "$" in text or "美元" in text)
                and re.search(r"\d{3,}|万", a.group(0))
            ):
                value = int(a.group(1).replace(",", "")) * (
                    10000 if a.group(2) == "万" else 1000 if a.group(2) else 1
                )
                detail = f"USD {value:,}"
        elif kind == "status":
            detail = next((v for w, v in STATUS_ZH if w in text), "")
        elif kind == "owner":
            m2 = re.search(rf"(?:分配给|由)\s*({NAME})", text) or re.search(
                rf"({NAME})\s*(?:参加|组织|创建|撰写)", text
            )
            detail = m2.group(1) if m2 else owner_name(text)
        out.append(Part("condition", kind, _span(text, m), detail=detail))
    supported = {k: ok for _, k, _, ok in CROSS_CONDS}
    meaning = {k: mean for _, k, mean, _ in CROSS_CONDS}
    for kind, rx in CROSS_ZH.items():
        m = re.search(rx, text)
        if m is None:
            continue
        detail = meaning[kind]
        if kind == "duplicate":
            detail = zh_duration(text[m.start() : m.end() + 30]) or zh_duration(text) or detail
        elif kind == "tier":
            word = m.group(0)
            detail = TIER_ZH.get(word, word if word in TIERS else "") or next(
                (TIER_ZH[w] for w in TIER_ZH if w in text), detail
            )
        out.append(Part("condition", kind, _span(text, m), detail=detail, supported=supported[kind]))
    return out


def _zh_select(body: str) -> tuple[int, str] | None:
    """Where the selected record noun is and its service. Chinese puts the head noun last
    ("同一客户、同一金额、3天内出现两次的扣款"): the last record noun of the object of 找出/列出, else
    of the first clause, else the first record noun at all."""
    m = FIND_ZH.search(body)
    start = m.end() if m else 0
    segment = re.split(r"[，,。；;：:]", body[start:], maxsplit=1)[0]
    hit = _last(segment, NOUNS_ZH) or _last(segment, WEAK_NOUNS_ZH)
    return (hit[0] + start, hit[1]) if hit else _first(body, NOUNS_ZH) or _first(body, WEAK_NOUNS_ZH)


def _zh_writes(
    body: str, anchor: str, services: Sequence[str], spans: list[tuple[int, int]], drafts: bool
) -> list[Part]:
    out: list[Part] = []
    written: set[str] = set()
    acts: list[str] = []
    for rx, verb_svc, verb_action in WRITES_ZH:
        w = next((w for w in re.finditer(rx, body) if not any(a <= w.start() < b for a, b in spans)), None)
        incoming = re.search(r"(?:一封|这封|该)邮件.{0,10}(?:要求|请求|询问)|来信", body) is not None
        admitted = admit_write(verb_svc, verb_action, anchor, incoming, services)
        if w is None or admitted is None or not admitted.fresh(written, acts, drafts):
            continue
        target, action = admitted.target, admitted.action
        detail = "draft" if action == "draft" else ""
        if action == "tag":
            tag = re.search(r"(?:标签|标记为)\s*[“\"'「]?([a-z][a-z0-9_-]{1,30})", body[w.start() :])
            detail = tag.group(1) if tag else ""
        if action in ("send", "share", "publish", "reply"):
            before = re.split(r"[，,。；;：:]", body[: w.start()])[-1]  # "给 x@y.com 发邮件"
            addr = ADDRESS.search(before + re.split(r"[，,。；;]", body[w.start() :], maxsplit=1)[0])
            detail = addr.group(0).lower() if addr else detail
        out.append(Part("write", action, _span(body, w), service=target, detail=detail))
    return out


def read_scenario_zh(text: str, services: Sequence[str]) -> tuple[Part, ...]:
    """The parts of a Chinese scenario (see the module docstring)."""
    body, distractor = text, ""
    if re.search(r"干扰项\s*[:：]", text):
        body, distractor = re.split(r"干扰项\s*[:：]", text, maxsplit=1)
    parts: list[Part] = []
    hit = _zh_select(body)
    anchor = hit[1] if hit else ""
    if hit is not None:
        parts.append(Part("select", anchor, body[hit[0] : hit[0] + 20], service=anchor))
    parts += _zh_conditions(body)
    forbidden = list(FORBID_ZH.finditer(body))
    spans = [(f.start(), f.end()) for f in forbidden]
    drafts = "草稿" in body or "起草" in body or any(FORBID_VERBS[f.group(1)] == "send" for f in forbidden)
    parts += _zh_writes(body, anchor, services, spans, drafts)
    written = {p.service for p in parts if p.kind == "write"}
    for rx, svc in SERVICE_WORDS_ZH:
        if svc == anchor or svc in written or svc not in services:
            continue
        j = re.search(rx, body)
        if j is not None:
            parts.append(Part("join", svc, _span(body, j), service=svc))
    for f in forbidden:
        parts.append(Part("forbid", FORBID_VERBS[f.group(1)], _span(body, f, 4)))
    if distractor:
        misses = [p for p in _zh_conditions(distractor) if p.supported]
        detail = misses[0].value if misses else ""
        if misses and misses[0].detail:
            detail += f" ({misses[0].detail})"
        parts.append(Part("distractor", "near_miss", distractor.strip()[:120], detail=detail))
    return tuple(parts)


# ---------------------------------------------------------------- rendering

NOUN_ZH = {
    "ticket": "工单",
    "customer account": "客户账户",
    "unpaid invoice": "未付发票",
    "knowledge-base article": "知识库文章",
    "integration": "集成",
    "scheduled job": "定时任务",
    "pending to-do": "待办事项",
    "customer meeting": "客户会议",
    "customer email": "客户邮件",
    "call note": "通话记录",
    "project document": "项目文档",
    "stocked product": "库存产品",
    "news article": "新闻文章",
}
DEPT_ZH = {
    "Engineering": "工程部",
    "Sales": "销售部",
    "Finance": "财务部",
    "Design": "设计部",
    "Marketing": "市场部",
    "Operations": "运营部",
    "Legal": "法务部",
    "Support": "客服部",
}
REASONS_ZH = {
    "it is under a legal hold": "该记录处于法律保全中",
    "the customer disputed it and finance froze it": "客户对其提出异议，财务已将其冻结",
    "security is investigating it": "安全团队正在调查此事",
}
Rule = tuple[str, str]

COND_RULES: tuple[Rule, ...] = (
    (r"assigned to someone who is out of office today \(their leave is in the calendar\)",
     "分配给今天休假（不在办公室）的人（休假记录在日历中）"),
    (r"owned by someone who is out of office today \(their leave is in the calendar\)",
     "归今天休假（不在办公室）的人所有（休假记录在日历中）"),
    (r"still open after more than (\d+) days", r"开启超过 \1 天仍未关闭"),
    (r"marked (\w+) priority", r"优先级为 \1"),
    (r"with priority (\w+)", r"优先级为 \1"),
    (r"marked (\w+)", r"状态为 \1"),
    (r"with status (\w+)", r"状态为 \1"),
    (r"in (\w+) status", r"状态为 \1"),
    (r"whose last run failed", "上次运行状态为 failed"),
    (r"with last status (\w+)", r"上次运行状态为 \1"),
    (r"not contacted in more than (\d+) days", r"超过 \1 天未联系"),
    (r"with annual revenue above USD ([\d,.]+)", r"年营收超过 \1 美元"),
    (r"issued more than (\d+) days ago", r"开具已超过 \1 天"),
    (r"for more than USD ([\d,.]+)", r"金额超过 \1 美元"),
    (r"not updated in more than (\d+) days", r"超过 \1 天未更新"),
    (r"with credentials last verified more than (\d+) days ago", r"凭证上次验证已超过 \1 天"),
    (r"that have not run in more than (\d+) days", r"超过 \1 天未运行"),
    (r"overdue by more than (\d+) days", r"逾期超过 \1 天"),
    (r"due within the next (\d+) days", r"在未来 \1 天内到期"),
    (r"starting within the next (\d+) days", r"在未来 \1 天内开始"),
    (r"received more than (\d+) days ago", r"收到已超过 \1 天"),
    (r"received in the last (\d+) days", r"在最近 \1 天内收到"),
    (r"from the last (\d+) days", r"来自最近 \1 天"),
    (r"created more than (\d+) days ago", r"创建已超过 \1 天"),
    (r"published in the last (\d+) days", r"在最近 \1 天内发布"),
    (r"below their minimum stock threshold", "库存低于最低库存阈值"),
    (rf"assigned to ({NAME})", r"分配给 \1"),
    (rf"owned by ({NAME})", r"归 \1 所有"),
    (rf"organized by ({NAME})", r"由 \1 组织"),
    (rf"that ({NAME}) attended", r"\1 参加过"),
    (rf"written by ({NAME})", r"由 \1 撰写"),
    (r"from a customer on the (\w+) tier \(tier on their CRM account\)",
     r"来自 \1 等级的客户（等级见其 CRM 账户）"),
    (r"billed to a customer on the (\w+) tier \(tier on their CRM account\)",
     r"开给 \1 等级的客户（等级见其 CRM 账户）"),
    (
        r"that duplicates an earlier charge: same customer, same amount, within (\d+) days of it "
        r"\(list only the later charge of each pair\)",
        r"与此前一笔扣款重复（同一客户、同一金额、相隔 \1 天以内；每对只列后一笔）",
    ),
    (
        r"whose category has no matching knowledge-base article \(search the KB by category\)",
        "其类别在知识库中没有对应文章（按类别搜索知识库）",
    ),
    (r"that breaches the limit in the current '(.+)'", r"超出现行“\1”规定的限制"),
)  # fmt: skip
VERB_RULES: tuple[Rule, ...] = (
    (r"move it to in progress with a note", "将其改为处理中并附上备注"),
    (r"log a note on the account", "在账户上记录一条备注"),
    (r"submit one collections report covering exactly those invoices", "提交一份恰好涵盖这些发票的催收报告"),
    (r"append a dated review line to it", "在其末尾追加一行带日期的审核记录"),
    (r"disable it with a note", "将其禁用并附上备注"),
    (r"pause it", "将其暂停"),
    (r"set it to in progress", "将其设为处理中"),
    (
        r"book a 30-minute prep slot on the same morning \(08:00 UTC\), titled with the meeting id",
        "在会议当天早上（UTC 08:00）预订一个 30 分钟的准备时段，标题写上会议编号",
    ),
    (r"reply to it", "回复它"),
    (r"share it with (?P<who>.+)", "与{who}分享"),
    (r"write one summary document listing them by id", "写一份按编号列出它们的汇总文档"),
    (r"order enough to reach twice the threshold", "下单补货，使库存达到阈值的两倍"),
    (
        r"publish one internal bulletin listing them by id, addressed to (?P<who>.+)",
        "发布一份按编号列出它们的内部简报，发给{who}",
    ),
    (r"tag it (\S+) \(keeping its current tags\) with a note", r"为其加上标签 \1（保留现有标签）并附上备注"),
    (r"reassign it to (?P<who>.+) with a note", "将其重新分配给{who}并附上备注"),
    (r"close it with a resolution note", "将其关闭并附上解决说明"),
    (r"trigger a run of it now", "立即触发一次运行"),
    (r"cancel it \(delete the event\)", "取消它（删除该日程）"),
)
CLAUSE_RULES: tuple[Rule, ...] = (
    (r"For each, (?P<verb>.+)\.", "对每一条：{verb}。"),
    (r"Then (?P<verb>.+)\.", "然后{verb}。"),
    (
        r"Draft \(do not send\) an email to (?P<who>.+) about each one \(one draft per record, naming it\)\.",
        "为每一条给{who}起草一封邮件（不要发送；每条记录一份草稿，写明该记录）。",
    ),
    (
        r"Email (?P<who>.+) about each one \(one email per record, naming it\)\.",
        "就每一条给{who}发一封邮件（每条记录一封，写明该记录）。",
    ),
    (
        r"Add a high-priority follow-up to-do for each, due (\d+) days from today\.",
        r"为每一条添加一个高优先级的跟进待办，\1 天后到期。",
    ),
    (
        r"Open a high-priority helpdesk ticket for each, titled with its id\.",
        "为每一条开一个高优先级的服务台工单，标题写上其编号。",
    ),
    (
        r"Book one 30-minute review (\d+) days from today at 10:00 UTC with (?P<who>.+), "
        r"titled with the ids\.",
        r"在 \1 天后 UTC 10:00 与{who}预约一次 30 分钟的评审会，标题写上这些编号。",
    ),
    (
        r"Send (?P<who>.+) a config notification for each, with its id in the subject\.",
        "为每一条给{who}发送一条配置通知，主题中写上其编号。",
    ),
    (
        r"Schedule a daily 09:00 re-check job for each, named recheck-<id>\.",
        "为每一条创建一个每天 09:00 运行的复查任务，命名为 recheck-<编号>。",
    ),
    (r"Write a '(.+)' document listing them by id\.", r"写一份标题为“\1”的文档，按编号列出它们。"),
    (r"Publish a '(.+)' bulletin listing them by id\.", r"发布一份标题为“\1”的简报，按编号列出它们。"),
    (
        r"Submit one finance report of their companies' open invoices from the last 30 days\.",
        "提交一份财务报告，列出这些公司最近 30 天内的未结发票。",
    ),
    (r"Note each one on the customer's CRM record\.", "在客户的 CRM 记录上逐条备注。"),
    (
        r"Message (?P<who>.+) through contacts with the list of ids\.",
        "通过通讯录给{who}发消息，附上编号列表。",
    ),
    (
        r"Cite the current (.+) escalation procedure from the knowledge base in each note\.",
        r"每条备注中都要引用知识库里现行的 \1 升级处理流程。",
    ),
    (
        r"Check (?P<where>the inbox|the .+ records) for anything that should stop you "
        r"before you change a record\.",
        "修改任何记录之前，先检查{where}中是否有应当阻止你的信息。",
    ),
    (
        r"Everything you write must cite our change reference - ask me for it before writing\.",
        "你写的所有内容都必须引用我们的变更编号——动笔前先问我要。",
    ),
    (r"Tell me which records you acted on and what you did\.", "最后告诉我你处理了哪些记录、做了什么。"),
)
WHO_RULES: tuple[Rule, ...] = (
    (r"the customer contact on their CRM record", "其 CRM 记录上的客户联系人"),
    (
        r"the account manager named on their CRM record \(address in contacts\)",
        "其 CRM 记录上写明的客户经理（地址见通讯录）",
    ),
    (
        r"the escalation contact the policy names \(address in contacts\)",
        "政策中指定的升级联系人（地址见通讯录）",
    ),
    (r"the owner", "负责人"),
    (
        r"their backup \(named on the absent colleague's contact record\)",
        "其代班同事（写在休假同事的通讯录记录上）",
    ),
    (rf"(?P<name>{NAME}) \((?P<email>[^,)]+), covering for them\)", "{name}（{email}，代其处理工作）"),
    (rf"(?P<name>{NAME}) \((?P<email>[^,)]+)\)", "{name}（{email}）"),
    (rf"(?P<name>{NAME}) from (?P<dept>\w+) \(address in contacts\)", "{dept}的 {name}（地址见通讯录）"),
    (r"(?P<email>[a-z0-9][a-z0-9._+-]*@[a-z0-9.-]+)", "{email}"),
)
ANSWER_RULES: tuple[Rule, ...] = (
    (r"Matched (.+)\.", r"匹配的记录：\1。"),
    (r"Withheld the action on (\S+): (?P<reason>.+)\.", r"未对 \1 执行操作：{reason}。"),
    (r"Cited change reference (\S+)\.", r"已引用变更编号 \1。"),
    (r"Ruled out (.+) \(near misses\)\.", r"已排除 \1（看似符合，实则不符）。"),
    (r"All writes done\.", "所有写操作均已完成。"),
)


def _apply(
    rules: Sequence[Rule], text: str, what: str, fill: Callable[[re.Match[str]], dict[str, str]]
) -> str:
    for rx, tpl in rules:
        m = re.fullmatch(rx, text)
        if m is not None:
            return m.expand(tpl).format(**fill(m))
    raise ZhMissing(f"no Chinese rendering for the {what} {text!r}")


def _pad(text: str) -> str:
    """Latin words set off by spaces inside Chinese text ("给 ops@company.com 发")."""
    head = " " if re.match(r"[A-Za-z0-9]", text) else ""
    tail = " " if re.search(r"[A-Za-z0-9.)]$", text) else ""
    return f"{head}{text}{tail}"


def render_who(text: str) -> str:
    def fill(m: re.Match[str]) -> dict[str, str]:
        g = m.groupdict()
        return {**g, "dept": DEPT_ZH.get(g.get("dept") or "", g.get("dept") or "")}

    return _pad(_apply(WHO_RULES, text, "recipient", fill))


def _fill(m: re.Match[str]) -> dict[str, str]:
    g = {k: v for k, v in m.groupdict().items() if v is not None}
    out = dict(g)
    if "who" in g:
        out["who"] = render_who(g["who"])
    if "verb" in g:
        out["verb"] = _apply(VERB_RULES, g["verb"], "action", _fill)
    if "where" in g:
        noun = g["where"].removeprefix("the ").removesuffix(" records")
        out["where"] = "收件箱" if g["where"] == "the inbox" else f"{NOUN_ZH.get(noun, noun)}记录"
    if "reason" in g:
        out["reason"] = REASONS_ZH.get(g["reason"], g["reason"])
    return out


def render_clause(text: str) -> str:
    """One English request clause in Chinese (raises :class:`ZhMissing` when no rule fits)."""
    return _apply(CLAUSE_RULES, text, "clause", _fill)


def render_find(noun: str, conds: Sequence[str]) -> str:
    """The selection clause: "Find every <noun> <cond> and <cond>." in Chinese."""
    if noun not in NOUN_ZH:
        raise ZhMissing(f"no Chinese rendering for the record noun {noun!r}")
    zh = [_apply(COND_RULES, c.strip(), "condition", _fill) for c in conds]
    gap = " " if re.search(r"[A-Za-z0-9]$", zh[-1]) else ""
    return f"找出所有{'、且'.join(zh).rstrip()}{gap}的{NOUN_ZH[noun]}。"


def render_answer(text: str) -> str:
    """The reference answer's sentences in Chinese."""
    sentences = [s for s in re.split(r"(?<=\.)\s+", text.strip()) if s]
    return "".join(_apply(ANSWER_RULES, s, "answer sentence", _fill) for s in sentences)


def render_signoff(name: str, department: str) -> str:
    return f"\n\n谢谢，\n{name}（{DEPT_ZH.get(department, department)}）"


HOLD_WORDS_ZH = "保全|冻结|调查|未执行|未修改|没有修改|暂不处理|标记"
"""What a Chinese answer says when it withholds an action (beside the English words)."""
