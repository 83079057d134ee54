//! The multilingual concepts the combination rules look for, one pattern per concept, each
//! matched against the normalised text (lowercase, NFKC, look-alikes folded).
//!
//! Languages: English, German, Spanish, French, Italian, Portuguese, Dutch, Polish, Russian,
//! Ukrainian, Chinese, Japanese and Korean. Chinese, Japanese and Korean have no spaces
//! between words, so their alternatives carry no word boundaries.
//!
//! A concept alone flags nothing (contribution guides say "you must", docs name AI tools,
//! code handles tokens); [`super::signals`] decides which combinations, within one sentence,
//! are text aimed at the agent.

/// Nouns that name an AI system, in every language.
pub(crate) const AI_NOUN: &str = concat!(
    r"(?:\b(?:ai|a\.i\.|llms?|large\W{1,3}language\W{1,3}models?|language\W{1,3}models?|",
    r"ai\W{1,3}(?:models?|assistants?|agents?|tools?|systems?|reviewers?|bots?|coders?|helpers?|contributors?)|",
    r"(?:coding|code|software|autonomous|automated|ai-powered|programming|swe|dev)\W{1,3}(?:assistants?|agents?|bots?)|",
    r"chatbots?|chat\W?gpt|gpt-?\d(?:\.\d)?o?|gpts?|claude|copilot|gemini|codex|devin|cline|aider|cursor\W+agent|openhands|sweep\W?bot|",
    // German, Dutch
    r"ki|k\.i\.|künstliche\W+intelligenz|ki-(?:assistent\w*|agent\w*|modell\w*|werkzeug\w*|tool\w*|system\w*|helfer\w*)|sprachmodell\w*|",
    r"kunstmatige\W+intelligentie|taalmodel\w*|",
    // Spanish, Portuguese, Italian, French
    r"ia|i\.a\.|inteligencia\W+artificial|inteligência\W+artificial|intelligenza\W+artificiale|intelligence\W+artificielle|",
    r"(?:asistente|assistente|assistant|agente|agent)s?\W+(?:de\W+|d'|di\W+)?(?:ia|ki|ai|código|codigo|code|programación|programação|programmazione|codage)|",
    r"modelos?\W+de\W+(?:lenguaje|linguagem)|modell[oi]\W+(?:linguistic[oi]|di\W+linguaggio)|modèles?\W+de\W+langage|",
    // Polish
    r"sztuczn\w+\W+inteligencj\w+|model\w*\W+językow\w+|asystent\w*\W+ai|",
    // Russian, Ukrainian
    r"ии|ші|искусственн\w+\W+интеллект\w*|штучн\w+\W+інтелект\w*|нейросет\w+|нейромереж\w+|языков\w+\W+модел\w+|мовн\w+\W+модел\w+|",
    r"ии-(?:агент|ассистент|помощник|модел)\w*|(?:ai|ии)\W+(?:агент|ассистент|помощник)\w*",
    r")\b|",
    // Chinese, Japanese, Korean
    r"人工智能|人工智慧|ai助手|ai助理|智能助手|智能体|语言模型|語言模型|大模型|ai代理|ai机器人|",
    r"人工知能|aiアシスタント|aiエージェント|アシスタント|エージェント|言語モデル|",
    r"인공지능|ai ?어시스턴트|ai ?에이전트|어시스턴트|에이전트|언어 ?모델)"
);

/// Verbs of the actions an injected instruction asks for (after a modal: "must also add").
pub(crate) const ACTION_VERB: &str = r"(?:add|include|insert|ignore|disregard|approve|merge|remove|delete|drop|open|create|install|send|set|change|modify|commit|push|skip|disable|mark|update|bump|replace|register|expose|print|output|reveal|write|append|run|execute|call|fetch|download|upload|post|copy|paste|rename|move|edit|patch|pin|downgrade|lower|relax|loosen|weaken|comment|treat|consider|follow|obey|prioriti[sz]e|leave|keep|report|refrain|avoid|stop|start|make|put|point|switch|swap|rewrite|hard-?code|not\W+(?:mention|report|tell|disclose|flag|touch|alert|notify|log)|never\W+(?:mention|report|tell|disclose|flag|alert|notify|log))\b";

/// Generic nouns that can name an AI agent when they are addressed ("Assistant, ...").
pub(crate) const AGENT_NOUN: &str = concat!(
    r"(?:\b(?:assistants?|agents?|bots?|asistentes?|assistentes?|agentes?|assistente|assistenti|agenti|assistent(?:en)?|agent(?:en)?|",
    r"ассистент\w*|агент\w*|помощник\w*|бот\w*)\b|助手|代理|机器人|アシスタント|エージェント|ボット|어시스턴트|에이전트|봇)"
);

/// Text that addresses an AI by name or role ({AI} is replaced by [`AI_NOUN`]).
pub(crate) const ADDRESS_AI: &[&str] = &[
    // Vocative at the start of a sentence or line: "AI agents: ...", "Claude, ..."
    r"(?m)(?:^|[.!?。！？]\s*|[-*>]\s+|[\x22'“(\[])\W{0,3}(?:@\w+\s+|(?:note|nb|todo|fixme|xxx|hack|important|attention|warning|psa|fyi|remarks?)\W{0,3}\s*)?(?:(?:the|all|any|every|dear|hey|hi|hello|attention|attn|note\W+to|a|an|to)\W+)?{AI}s?(?:\s*(?:/|,|&|and|or|\+)\s*[\w-]+){0,3}(?:\W+(?:agents?|assistants?|bots?|models?|tools?))?\W{0,3}(?:[,:：，、—–]\s*(?:[^\W\d_]+\W+){2}[^\W\d_]|\bplease\b)",
    r"(?:\A|[.!?。！？]\s+)\W{0,3}{AGENT}\s*[,:：，]\s*(?:[^\W\d_]+\W+){2}[^\W\d_]",
    // "Note to the AI", "instructions for LLM agents"
    r"\b(?:note|notice|message|instructions?|reminder|attention|attn|warning|important|psa|directive|hint|memo|heads\W+up|fyi|request)\W{0,4}(?:to|for)\W{1,4}(?:(?:the|all|any|every|each|you|fellow)\W{1,3})?{AI}",
    r"\b(?:attention|attn|hey|hi|hello|dear|greetings|yo|calling)\W{1,4}(?:(?:the|all|any|fellow|every|you)\W{1,3})?{AI}",
    r"\bto\W{1,4}(?:whichever|whatever|any|every|each|the|all)\W{1,4}{AI}",
    // "if you are an AI", "as an AI, you ..."
    r"\bif\W+you\W{0,3}(?:are|re|'re)\W+(?:an?\W+|the\W+|one\W+of\W+the\W+)?(?:\w+\W+)?(?:{AI}|{AGENT})",
    r"\bas\W+an?\W+{AI}\b[^\n.]{0,40}\byou\b",
    r"\b(?:you\W+are|you're|you\W+re)\W+(?:now\W+)?(?:an?\W+)?{AI}\W+(?:\w+\W+){0,3}?(?:reading|working|fixing|processing|asked|tasked|assigned|looking)",
    // "AI agents reading this", "language models processing this file"
    r"{AI}s?\W{1,3}(?:that\W+(?:is|are)\W+|who\W+(?:is|are)\W+|(?:is|are)\W+)?(?:reading|processing|parsing|analy[sz]ing|reviewing|scanning|ingesting|summari[sz]ing|crawling|indexing|seeing|working\W+(?:on|with|in)|fixing|editing|touching|modifying|tasked\W+with|assigned\W+to|handling|visiting|operating\W+(?:on|in))\b",
    // The AI as the subject of a modal: "Copilot must also ...", "KI-Agenten müssen ..."
    r"{AI}s?\W{1,3}(?:\w+\W{1,3}){0,3}?(?:should|must|shall|needs?\W+to|has\W+to|have\W+to|will\W+now|is\W+(?:required|instructed|expected|asked|supposed)\W+to|are\W+(?:required|instructed|expected|asked|supposed)\W+to|can\W+now|may\W+now)\W+(?:also\W+|always\W+|now\W+|first\W+|then\W+|quietly\W+|silently\W+|additionally\W+|still\W+)?{ACT}",
    r"{AI}\W{1,3}(?:muss|müssen|soll|sollen|sollte|sollten|hat\W+zu|haben\W+zu|moet|moeten|debe|deben|debería|deberían|tiene\W+que|tienen\W+que|doit|doivent|devrait|devraient|deve|devono|devem|dovrebbe|dovrebbero|deveria|deveriam|precisa|precisam|powinien|powinna|powinny|musi|muszą|долж\w+|обязан\w*|следует|нужно|має|повин\w+)\b",
    r"\b(?:toi|vous)\W+(?:l'|le\W+|la\W+|les\W+)?{AI}|\b(?:tú|tu|você|vocês)\W+(?:el\W+|la\W+|o\W+|a\W+)?{AI}|\b(?:du|ihr)\W+(?:da\W+)?(?:\w+\W+)?{AI}\W+(?:der|die|das)\b",
    // German, Dutch
    r"\b(?:hinweis|nachricht|anweisung(?:en)?|notiz|achtung|bitte|an\W+alle|aan)\W{1,3}(?:an|für|voor|de|het)?\W{0,3}(?:die|den|das|alle|jede[nrs]?)?\W{0,3}{AI}",
    r"\b(?:wenn|falls)\W+(?:du|sie|ihr)\W+(?:ein|eine|einen|das|die)?\W*(?:{AI}|{AGENT})\W+(?:bist|sind|seid)\b|\bals\W+(?:ki|sprachmodell|ki-\w+)\b",
    // Spanish, Portuguese, Italian, French
    r"\b(?:nota|mensaje|mensagem|messaggio|message|instrucciones|instruções|istruzioni|instructions?|aviso|avviso|avis|atención|atenção|attenzione|attention|recordatorio|importante|importante)\W{1,3}(?:para|a|al|ao|aos|à|às|aux?|pour|per|agli|all'|alla|alle)\W{0,3}(?:el|la|los|las|o|os|a|as|l'|les?|il|lo|gli|i|cualquier|qualquer|qualsiasi|tout|tous\W+les|todos\W+los|todos\W+os)?\W{0,3}{AI}",
    r"\b(?:si|se)\W+(?:eres|es|sei|siete|êtes|tu\W+es|vous\W+êtes|você\W+é|você\W+for|fores|usted\W+es)\W+(?:un|una|um|uma|une)?\W*(?:{AI}|{AGENT})",
    r"\b(?:querid[oa]|estimad[oa]|cher|chère|caro|cara|olá|hola|bonjour|ciao|salut)\W+{AI}",
    // Polish
    r"\b(?:jeśli|jeżeli)\W+(?:jesteś|jesteście)\W+(?:\w+\W+)?(?:{AI}|{AGENT})|\b(?:uwaga|wiadomość|instrukcj\w+)\W+(?:dla|do)\W+{AI}",
    // Russian, Ukrainian
    r"(?:\b(?:примечание|сообщение|инструкци\w+|внимание|заметка|напоминание|обращение|увага|повідомлення)\W{1,3}(?:для|к|до)\W{1,3}(?:\w+\W+)?{AI})",
    r"\b(?:если|якщо)\W+(?:ты|вы|ти)\W+(?:\W*)(?:—\W*|-\W*|є\W+)?(?:\w+\W+)?(?:{AI}|{AGENT})",
    r"(?:\b(?:дорогой|уважаемый|эй|привет)\W+{AI})",
    // Chinese
    r"(?:致|给|对|告诉|提醒|通知|请|各位|亲爱的|所有的?|任何)\s*{AI}",
    r"(?:如果你是|若你是|假如你是|如果您是|作为一个?)\s*(?:一个|一名)?\s*(?:\S{0,6})?{AI}",
    r"{AI}\s*(?:请|须|必须|应该|应当|需要|务必|要|注意|：|，)",
    // Japanese
    r"{AI}(?:の皆さん|各位|さん|様|へ|に告ぐ|に対して|向け)",
    r"(?:あなたが|もしあなたが|あなたは)\s*{AI}",
    r"{AI}(?:は|が)\s*(?:必ず|\S{0,20}(?:してください|すること|しなければ|べき))",
    // Korean
    r"{AI}\s*(?:에게|께|여러분|님)",
    r"(?:당신이|만약 당신이|당신은|너는)\s*{AI}",
    r"{AI}(?:는|은|가|이)\s*(?:반드시|\S{0,20}(?:해야|하세요|하십시오|해 ?주세요))",
];

/// Text addressed to an automated reader without naming AI ("automated contributors must",
/// "whoever automates fixes here", "the process reading this page").
pub(crate) const ADDRESS_AUTOMATION: &[&str] = &[
    r"(?m)(?:^|[.!?]\s+)\W{0,3}(?:@\w+\s+)?(?:editors?|fix\W+authors?|patch\W+(?:generators?|authors?|writers?|submitters?|bots?|tools?)|pr\W+(?:bots?|generators?|authors?)|code\W+generators?|generators?|automation|tooling|bots?|(?:automated|automatic|auto)\s+\w+|maintenance\W+(?:bots?|tools?|scripts?)|refactoring\W+tools?|whoever\W+\w+|whatever\W+\w+):\s*(?:[^\W\d]\w*\W+){2}",
    r"\b(?:patch|fix|pr|bug-?fix)\W?(?:generators?|writers?|bots?|submitters?|tooling|authors?)\b|(?m)(?:^|[.!?]\s+)\W{0,3}fixers?\s*:|\((?:or|and|/)\W*(?:a\W+)?(?:tool|bot|agent|program|ai|script|automation|machine|llm)s?\)|\b(?:person|human|developer|contributor)\W+(?:or|/)\W+(?:tool|bot|agent|program|ai|script|machine|llm)\b",
    r"\b(?:anyone|anybody|anything|whoever|whatever|any\W+(?:person|one|contributor|developer)|the\W+next\W+(?:person|one|edit|editor|change|contributor|patch|pr|commit|fix|refactor|update|revision|pass|run|author))\W+(?:\w+\W+){0,2}?(?:edit|touch|rewrit|fix|refactor|regenerat|reformat|patch)\w*\b|\bthe\W+next\W+(?:edit|patch|pr|commit|fix|refactor)\b",
    r"\b(?:software|programs?|tools?|systems?|process(?:es)?|scripts?|bots?|models?|machines?|something|anything)\W+(?:that|which)\W+(?:is\W+|are\W+)?(?:writ|generat|produc|edit|fix|author|draft|emit)\w*\W+(?:\w+\W+)?(?:code|patch|patches|fixes|prs|pull\W?requests|changes|commits|diffs)\b|\bwithout\W+a\W+human\W+(?:typing|writing|reviewing|in\W+the\W+loop)\b|\bno\W+human\W+(?:is\W+)?(?:typing|writing|involved|in\W+the\W+loop)\b|\bbeing\W+read\W+by\W+(?:software|a\W+(?:program|tool|machine|model|bot))\b",
    r"\b(?:automated|automatic|autonomous|unattended|programmatic|non-human|machine|bot|robotic|generative|auto-?generated|scripted)\W+(?:\w+\W+)?(?:contributors?|committers?|tools?|tooling|fixers?|patchers?|patch\W+(?:generators?|authors?|writers?|tools?)|agents?|systems?|process(?:es)?|programs?|editors?|submitters?|refactor(?:ing|ers?)\W+tools?|maintainers?|workers?|readers?|pipelines?|helpers?|authors?|developers?|engineers?|coders?|assistants?|solvers?|repair\W+tools?|fix\W+generators?|code\W+generators?|pr\W+generators?)\b",
    r"\b(?:whoever|any\W+(?:tool|program|process|system|script|bot|service|software|automation|contributor|pipeline|machine|engine|generator|editor|workflow))\W+(?:\w+\W+){0,3}?(?:automat|generat|produc|writ|edit|read|pars|process|fix|submit|open|rewrit|touch|scan|ingest|consum|analy|review|prepar|draft|author|repair|patch|resolv)\w*|\b(?:anyone|anybody)\W+(?:(?:who|that|here)\W+)?(?:automat|generat|produc|edit|fix|submit|rewrit|touch|prepar|draft|repair|patch|resolv)\w*|\b(?:whatever|whoever)\W+(?:is|are)\W+(?:now\W+)?\w+ing\W+(?:this|these)\b",
    r"\b(?:programs?|tools?|process(?:es)?|systems?|scripts?|software|services?|bots?|pipelines?|automations?|engines?|generators?|models?|machines?)\W+(?:that|which|who)\W+(?:\w+\W+){0,2}?(?:edit|modif|chang|patch|fix|read|pars|process|generat|writ|rewrit|touch|open|submit|produc|draft|prepar|consum|ingest|scan|review|automat|resolv|repair|author)\w*",
    r"\bon\W+(?:some(?:one|body)|a\W+(?:user|human|person|developer)|an?\W+\w+)\W*(?:'s|s)?\W+behalf\b",
    r"\bif\W+you\W{0,3}(?:are|re|'re)\W+(?:(?:currently|now|here|a\W+tool|a\W+program|a\W+system|a\W+process)\W+)?(?:(?:producing|generating|writing|preparing|submitting|drafting|authoring)\W+(?:a|the|this|your|any)\W+(?:\w+\W+)?(?:fix|patch|pr|pull|change|commit|diff|edit|contribution)|(?:parsing|processing|scanning|ingesting|analy[sz]ing)\W+(?:this|these|the\W+(?:file|text|page|document|repo\w*|code\W?base|issue|source))|automating|resolving\W+(?:this|the)\W+issue|acting\W+on|operating\W+on|reading\W+this\W+(?:automatically|programmatically|as\W+part))\b",
    r"\b(?:the|any|whatever|each|every)\W+(?:process|program|tool|system|reader|parser|crawler|bot|automation|model|pipeline|engine|script|software|service|machine|agent)\W+(?:that\W+is\W+|which\W+is\W+|that\W+|which\W+|now\W+|currently\W+)?(?:reading|parsing|processing|scanning|ingesting|consuming|analy[sz]ing|viewing|handling|working\W+on|editing|fixing|crawling|indexing|summari[sz]ing)\W+(?:this|these|the|our)\b",
    r"\b(?:note|message|instructions?|reminder|memo|housekeeping)\W+(?:for|to)\W+(?:whatever|whoever|anything|anyone|editors?|fixers?|tools?|tooling|automation|(?:code|patch|pr|fix)\W+(?:tools?|generators?|bots?|writers?)|any\W+(?:tool|bot|agent|program|process|system|script|reader|parser|model|assistant|automation|contributor|editor|fixer|generator|machine|pipeline|service)s?\b|the\W+(?:process|program|tool|system|parser|reader|automation|machine|editor|next\W+\w+))",
    r"\bhumans?\W+(?:readers?\W+|reviewers?\W+|contributors?\W+)?(?:may|can|should|could|are\W+free\W+to)\W+(?:safely\W+)?(?:ignore|skip|disregard)\b|\b(?:not|non)\W?(?:meant|intended|written|addressed)\W+for\W+humans?\b|\bif\W+you\W{0,3}(?:are|re|'re)\W+(?:not\W+)?(?:a\W+)?human\b|\bnot\W+a\W+human\b|\b(?:machine|automation)\W+readers?\b",
    r"\bautomation\W+(?:that|which|running|working|acting|reading|touching|editing)\b|\b(?:automated|automatic|generated)\W+(?:fix(?:es)?|patch(?:es)?|changes|pull\W?requests|prs|commits|submissions|contributions)\W+(?:must|should|shall|need\W+to|are\W+(?:required|expected)\W+to|have\W+to)\b",
    // Whoever edits this: "to whoever is fixing this", "the person who changes this file".
    r"\b(?:whoever|anyone|anybody|everyone|the\W+(?:person|people|one|folks?|developer|contributor)\W+(?:who|that))\W+(?:is\W+|are\W+|will\W+(?:be\W+)?|ends\W+up\W+)?(?:\w+\W+)?(?:fix|edit|modif|touch|chang|updat|handl|work|patch|resolv|address|tackl|implement|refactor|maintain|pick)\w*\b",
    r"\b(?:quien(?:quiera\W+que)?|quienes|el\W+que|la\W+persona\W+que)\W+(?:\w+\W+)?(?:toque|modifique|edite|cambie|arregle|corrija|trabaje|resuelva|atienda|actualice|mantenga|toquen|modifiquen)\b|\b(?:a\W+)?quem\W+(?:for\W+|vai\W+|quer\W+que\W+)?(?:\w+\W+)?(?:alterar|modificar|mexer|editar|corrigir|tocar|trabalhar|resolver|mudar|atualizar|altere|modifique|mexa|edite|corrija|resolva)\b|\b(?:per\W+)?chi\W+(?:\w+\W+)?(?:modifica|tocca|cambia|corregge|sistema|lavora|risolve|edita|aggiorna|modificherà|toccherà|mette\W+mano)\b",
    r"\b(?:quiconque|celui\W+qui|celle\W+qui|ceux\W+qui|la\W+personne\W+qui)\W+(?:\w+\W+)?(?:modifie|touche|corrige|change|édite|travaille|reprend|met\W+à\W+jour|modifiera|touchera)\b|\bwer\W+(?:\w+\W+){0,3}?(?:bearbeitet|ändert|anfasst|korrigiert|behebt|anpasst|repariert|fixt|umbaut|überarbeitet|angeht|bearbeiten\W+will)\b|\bkto\w*\W+(?:\w+\W+)?(?:modyfikuje|zmienia|poprawia|naprawia|edytuje)\b",
    r"\b(?:исправляющ\w+|правящ\w+\W+(?:этот|это)|редактирующ\w+)|\b(?:тот|те|того|тому|тем),?\W+кто\W+(?:\w+\W+)?(?:прав\w+|исправ\w+|меня\w+|изменя\w+|трога\w+|редактир\w+|чин\w+|работа\w+|займ\w+|возьм\w+)|\bкто\W+(?:будет\W+)?(?:править|исправлять|менять|изменять|трогать|чинить|редактировать)\b|(?:修改|处理|修复|改动|编辑|负责|维护|接手|动)(?:本|这个|此|该|这段|这份)?\S{0,8}的(?:人|同学|同事|开发者|朋友|各位|你)|(?:修正|変更|編集|対応|改修)(?:を行う|をする|する|される|を担当する|してくれる)(?:方|人|かた|皆さん)|(?:修正|変更)(?:担当)?者(?:へ|は|の方)|(?:수정|변경|편집|처리|해결|고치)(?:하는|하시는|할|실) ?(?:분|사람|담당자|개발자)",
    r"\bwithout\W+(?:a|any)\W+(?:person|human|people|reviewer)\W+(?:in\W+the\W+loop|involved|watching|typing)\b|\b(?:readers?|consumers?|processes|tools?|programs?|systems?)\W+(?:generating|producing|writing|making|drafting|emitting|creating)\W+(?:\w+\W+)?(?:changes|code|patches|fixes|prs|pull\W?requests|commits|edits|diffs)\b|\bwhoever\W+turns\W+(?:this|these|the)\W+(?:\w+\W+)?into\b|\b(?:reader|processor|consumer)\W+of\W+this\W+(?:file|page|document|text|config)\s*[:,]",
    r"\bwer\W+(?:\w+\W+){0,3}?(?:erzeugt|generiert|erstellt|schreibt|einreicht|produziert|automatisiert)\b|\bquem\W+(?:for\W+|vai\W+)?(?:gerar|criar|produzir|enviar|abrir|preparar|gere|crie|produza|envie|abra|prepare)\b|\bchi\W+(?:\w+\W+)?(?:produce|genera|crea|scrive|invia|prepara|apre)\b|\b(?:tout|toute|chaque|n'importe\W+quel)\W+(?:outil|programme|processus|système|script|bot|agent)\W+qui\W+(?:\w+\W+)?(?:produit|crée|écrit|prépare|soumet|propose|génère|modifie)\b",
    r"\bfor\W+(?:the\W+)?(?:tooling|automation|bots?|tools?|generators?|fixers?|automated\W+\w+|(?:code|patch|pr|fix)\W+(?:tools?|generators?|bots?|writers?))\s*:|\bbots?\W+(?:that\W+are\W+)?(?:editing|touching|modifying|reading|processing|changing|updating)\b|\b(?:repo(?:sitory)?|project|file|code|config)\W+editors?\b|\b(?:тот|те|того|тому|тем),?\W+кто\W+(?:\w+\W+)?(?:генерир\w+|созда\w+|готов\w+|пиш\w+|отправ\w+|делает)|\bquiconque\W+(?:\w+\W+)?(?:propose|soumet|envoie|prépare|ouvre)\b",
    r"\bfixers?\W+(?:must|should|shall|needs?\W+to|has\W+to)\b|(?m)(?:^|[.!?]\s+)\W{0,3}(?:docs?|code|test|lint|style|type|bug|config|ci|build)\W+(?:fixers?|editors?|bots?|tools?)\s*:|\bк\W+тому,?\W+кто\b|\b(?:тот|те|того|тому|тем),?\W+кто\W+(?:будет\W+)?(?:дела\w+|готов\w+)|(?:수정|변경|편집)(?:하는|하실|할) ?(?:쪽|팀|곳)",
    // German, Dutch
    r"\b(?:automatisiert\w*|automatisch\w*|autonom\w*|maschinell\w*|geautomatiseerd\w*|automatische)\W+(?:beitragende\w*|mitwirkende\w*|werkzeug\w*|tools?|system\w*|prozess\w*|programm\w*|änderung\w*|beitr[aä]g\w*|patch\w*|korrektur\w*|agent\w*|helfer\w*|bijdrager\w*|hulpmiddel\w*|pull-requests?)\b",
    r"\b(?:wer\W+(?:auch\W+immer\W+)?(?:hier\W+)?(?:automatisch|automatisiert|maschinell)|jedes?\W+(?:werkzeug|tool|programm|system|skript)\W+(?:das|welches|die)|programme?,?\W+die\W+(?:diese|den|dieses|hier)|wie\W+(?:dit|deze)\W+(?:automatisch|geautomatiseerd))\b",
    // Spanish, Portuguese
    r"\b(?:herramientas?|sistemas?|procesos?|programas?|contribuyentes?|colaboradores?|contribuciones|parches|cambios|agentes?|ferramentas?|processos?|contribuidores?|contribuições|alterações|mudanças|correcciones|correções)\W+(?:\w+\W+)?(?:automatizad\w*|automátic\w*|autónom\w*|autônom\w*)\b",
    r"\b(?:quien(?:quiera)?|cualquier\W+(?:herramienta|proceso|sistema|programa|script|bot)|quem\W+quer\W+que|qualquer\W+(?:ferramenta|processo|sistema|programa|script|bot))\W+(?:que\W+)?(?:\w+\W+)?(?:automatice|automatize|genere|gere|procese|processe|lea|leia|edite|modifique|corrija|produzca|produza|escriba|escreva|analice|analise)\b",
    // French, Italian
    r"\b(?:outils?|systèmes?|processus|programmes?|contributeurs?|contributions|correctifs|patchs?|modifications|agents?|strumenti|sistemi|processi|programmi|contributori|contributi|modifiche|correzioni)\W+(?:\w+\W+)?(?:automatis\w*|automatiques?|autonomes?|automatic[io]|automatizzat\w*|autonom[io])\b",
    r"\b(?:quiconque|tout\W+(?:outil|programme|processus|système|script|bot)|chiunque|qualsiasi\W+(?:strumento|processo|sistema|programma|script|bot)|qualunque\W+(?:strumento|processo|sistema|programma))\W+(?:qui\W+|che\W+)?(?:\w+\W+)?(?:automatise|génère|traite|lit|modifie|édite|corrige|rédige|automatizzi|generi|elabori|legga|modifichi|corregga|scriva|analizzi)\b",
    // Polish
    r"\b(?:zautomatyzowan\w+|automatyczn\w+)\W+(?:narzędzi\w*|system\w*|proces\w*|program\w*|kontrybutor\w*|zmian\w*|poprawk\w*|agent\w*)\b",
    // Russian, Ukrainian
    r"\b(?:автоматизированн\w+|автоматическ\w+|автономн\w+|автоматизован\w+|автоматичн\w+)\W+(?:инструмент\w*|систем\w*|процесс\w*|программ\w*|участник\w*|правк\w*|исправлени\w*|патч\w*|изменени\w*|агент\w*|контрибьютор\w*|інструмент\w*|процес\w*|учасник\w*|зміни?)\b",
    r"\b(?:кто\W+бы\W+ни|кто\W+(?:бы\W+)?(?:автоматически|автоматизирует)|любой\W+(?:инструмент|процесс|скрипт|бот)|любая\W+(?:программа|система)|будь-який\W+(?:інструмент|процес))\W+(?:\w+\W+)?(?:автоматизир\w+|генерир\w+|обрабатыва\w+|чита\w+|прав\w+|измен\w+|исправля\w+|обробля\w+)?",
    // Chinese
    r"自动化?(?:的)?(?:工具|系统|程序|流程|贡献者|提交者|修复工具|代理|脚本|机器人)|(?:任何|所有|每个)(?:自动化?的?)?(?:工具|程序|系统|脚本|流程|机器人)(?:在|都|如果|若|，|,|须|必须|应|请)|(?:自动|机器)(?:生成|修复|提交)(?:的)?(?:补丁|代码|pr|修复|提交|变更)|(?:正在|负责)(?:读取|解析|处理|分析|扫描)(?:此|这个|本)(?:文件|仓库|项目|文档)",
    // Japanese
    r"自動化(?:された)?(?:ツール|システム|プログラム|プロセス|コントリビューター|エージェント)|自動(?:生成|修正|化)(?:ツール|システム|プログラム)|(?:すべての|あらゆる|全ての)(?:自動化?)?(?:ツール|プログラム|システム|ボット)|(?:この|本)(?:ファイル|リポジトリ|文書)を(?:読んで|処理して|解析して)いる(?:ツール|プログラム|システム|プロセス)",
    // Korean
    r"자동화(?:된)? ?(?:도구|시스템|프로그램|프로세스|기여자|에이전트)|자동 ?(?:생성|수정) ?(?:도구|시스템|프로그램)|(?:모든|어떤) (?:자동화 )?(?:도구|프로그램|시스템|봇)|(?:이 파일|이 저장소)을 (?:읽는|처리하는|분석하는) (?:도구|프로그램|시스템)",
];

/// Phrases that put a request into the agent's own work ("when you fix this", "in your pull
/// request", "the generated patch", "in the same commit").
pub(crate) const AGENT_WORK: &[&str] = &[
    r"\b(?:for|in|to)\W+the\W+(?:next\W+)?(?:patch|pr|fix|pull\W?request|commit|change)(?:\W+(?:authors?|writers?|submitters?))?\s*:|\bnext\W+(?:pr|patch|commit|change|fix|pull\W?request)\b|\b(?:para|pour|per|für|fuer|dla|для)\W+(?:el|la|le|il|den|das|die|o|a|lo)?\W*(?:pr|patch|parche|fix|correctif|pull\W?request|commit)\b|\b(?:der|die|wer|den)\W*,?\W+(?:der\W+)?(?:den|das)\W+(?:fix|patch|pr)\W+(?:schreibt|macht|erstellt|liefert)|\bchi\W+(?:prepara|scrive|invia|fa)\W+(?:la\W+|il\W+)?(?:patch|pr|fix|correzione)|\bquem\W+(?:prepara|escreve|envia|enviar|fizer)\W+(?:o\W+|a\W+)?(?:patch|pr|fix|correção)|\bquien\W+(?:prepare|escriba|envíe|haga)\W+(?:el\W+|la\W+)?(?:parche|pr|fix|corrección)|\bcelui\W+qui\W+(?:prépare|écrit|soumet|fait)\W+(?:le\W+|la\W+)?(?:patch|pr|correctif)|\bтот\W+(?:\W+)?кто\W+(?:готовит|пишет|делает|исправляет|отправляет)|修正する方|修正する人|修正者|修复者|提交修复|修复的人|提交补丁|수정하는 ?분|수정하시는 ?분|패치를? ?(?:작성|준비)하는",
    r"\bas\W+part\W+of\W+(?:this|the|your|any|that)\W+(?:\w+\W+)?(?:pr|pull\W?request|fix|patch|change|commit|work|task|diff|submission)\b|\bon\W+every\W+(?:edit|change|run|commit|build|patch|fix)\b|\b(?:required|mandatory|needed|expected)\W+(?:for|in|on|with)\W+(?:every|each|any|all)\W+(?:patch|pr|change|commit|fix|submission)\w*\b|\b(?:fixes|patches|changes|prs|commits|contributions|submissions)\W+(?:also|additionally|should|must|need\W+to|have\W+to|are\W+(?:required|expected)\W+to)\b|\byour\W+(?:patch|fix|pr|change|commit|diff|submission|final\W+version)\b|\bthe\W+final\W+(?:version|patch|diff|pr|change|commit)\b",
    r"\bif\W+you\W+(?:happen\W+to\W+)?(?:be|are|'re|re)\W+(?:\w+\W+)?(?:editing|changing|touching|modifying|working|fixing|patching|refactoring|updating|regenerating)\b|(?m)^\W*(?:editing|changing|touching|modifying|fixing|patching|regenerating)\W+(?:\S+\W+){0,3}?\?|\b(?:after|once)\W+applying\W+(?:your|the)\W+(?:fix|patch|change)\b|\beditors?\W+of\W+this\W+(?:repo(?:sitory)?|file|project|code|module)\b|\bwer\W+(?:einen|den|das|eine)?\W*(?:patch|pr|fix|beitrag|änderung|pull-request|commit)\W+(?:\w+\W+)?(?:beisteuert|einreicht|schreibt|erstellt|öffnet|macht|liefert)\b",
    r"\b(?:patch|fix|pr|pull\W?request|change|commit|diff|edit|submission|contribution)(?:es|s)?\W+(?:generated|submitted|produced|opened|made|written|created|proposed|prepared|sent|landed|touching|to|for|of|in|against)\W+(?:(?:this|the|our|that)\W+)?(?:\w+\W+){0,2}?(?:repo(?:sitory)?|project|file|module|function|class|package|crate|directory|folder|code(?:base)?|manifest|config\w*|component|library|service|issue|bug|list|table|schema|section|page|script|workflow|handler|endpoint|template|migration|struct|enum|array|map|dictionary|readme|docs?|documentation)\b",
    r"\b(?:every|each|any|all)\W+(?:patch|pr|pull\W?request|change|commit|fix|contribution|submission|edit|diff)(?:es|s)?\W+(?:\w+\W+){0,3}?(?:may|can|must|should|shall|needs?\W+to|has\W+to|have\W+to|is\W+required|are\W+required|is\W+expected|are\W+expected|will)\b",
    r"\bwhen(?:ever)?\W+(?:this|the|that)\W+(?:\w+\W+)?(?:file|module|function|code|class|method|config\w*|manifest|section|component|handler|endpoint|test|page)\W+(?:is|gets|has\W+been|are|get)\W+(?:\w+\W+)?(?:changed|edited|modified|touched|updated|rewritten|refactored|regenerated|fixed|patched)\b",
    r"\bshould\W+you\W+(?:be\W+)?(?:\w+\W+)?(?:preparing|working|fixing|submitting|writing|opening|editing|touching|changing|patching|resolving|generating|drafting)\b|\b(?:preparing|writing|submitting|opening|drafting|making|sending)\W+(?:a|the|your|any)\W+(?:patch|pr|fix|pull\W?request|change|commit)\W+(?:for|to|against|on)\W+(?:this|the|our)\b|\b(?:files?|markdown\W+files?|code|lines?)\W+you\W+(?:touch|edit|change|modify|open|create|write|generate)\b",
    r"\b(?:when(?:ever)?|after|before|while|once|as\W+soon\W+as|if)\W{1,3}(?:you|they|you're|you\W+re)\W+(?:\w+\W+)?(?:fix|patch|submit|resolv|address|finish|complet|work\w*\W+on|open|touch|edit|modif|chang|refactor|updat|generat|prepar|draft|wrap\w*\W+up|redo|re-?do|tackl|land|merg|rework|revisit|are\W+done|get\W+to)\w*\b",
    r"\b(?:any|every|each|the|this|that|your)\W+(?:patch|fix|pr|change|diff|commit|pull\W?request|submission|edit)(?:es|s)?\W+(?:generated|submitted|produced|opened|made|written|created|proposed|prepared|sent|landed)\b|\bin\W+addition\W+to\W+(?:the|your|this|that)\W+(?:\w+\W+)?(?:fix|change|patch|work)\b|\b(?:bonus\W+points|extra\W+credit|while\W+you'?r?e?\W+(?:at|on)\W+it)\b|\b(?:any\W+)?extra\W+changes\W+you\W+make\b|\b(?:the|your|any)\W+(?:final\W+)?(?:report|summary|explanation|write-?up|description)\W+(?:\w+\W+)?(?:to\W+the\W+user|you\W+(?:give|write|return|produce|send|post))\b|\b(?:any\W+)?explanation\W+you\W+give\b",
    r"\b(?:as\W+part\W+of|while|when|before|after)\W{1,4}(?:fixing|resolving|addressing|patching|working\W+on|submitting|touching|editing|modifying|changing|opening)\b",
    r"\b(?:blocks?|breaks?|fails?|stops?|slows?)\W+(?:down\W+)?your\W+(?:change|patch|fix|pr|pull\W?request|commit|build|run)\b|\b(?:in|to|into|with)\W{1,3}(?:your|the\W+same)\W{1,3}(?:pull\W?request|pr|pr\W(?:description|body|title)|patch|diff|fix|commit(?:\W+message)?|response|reply|answer|output|summary|solution|submission|change(?:set)?|final\W+(?:answer|report|message|summary))\b|\b(?:in|to|into|with)\W{1,3}(?:this|that|the|any|every|each|their)\W{1,3}(?:pull\W?request|pr|pr\W(?:description|body|title)|patch|diff|fix|submission|changeset|final\W+(?:answer|report|message|summary))\b",
    r"\b(?:the|any|every|each|your|their)\W+(?:generated|submitted|resulting|final|proposed|automated|produced|outgoing)\W+(?:patch|fix|pr|pull\W?request|change|diff|commit|submission|summary)s?\b",
    r"\b(?:any|every|each)\W+(?:fix|patch|pr|pull\W?request|change|commit|contribution|submission)\W+(?:for|to|touching|that\W+touches|that\W+modifies|that\W+changes|which\W+touches|resolving|addressing)\b",
    r"\b(?:your|the)\W+(?:next|first|final|last)\W+(?:step|action|task)\b|\bsummary\W+you\W+(?:return|write|produce|give|send)\b|\bregardless\W+of\W+(?:the|your|what\W+the)\W+(?:task|issue|request|instructions|ticket)\b|\bwhile\W+you'?r?e?\W+(?:at\W+it|in\W+there|here)\b|\bwhile\W+(?:at\W+it|in\W+there)\b",
    r"\b(?:the|this)\W+(?:submitted|generated|final)\W+(?:patch|diff|pr)\b|\b(?:ideally|preferably)\W+(?:the|any|your)\W+(?:fix|patch|pr|change|submission)\b|\bthe\W+(?:fix|patch|change|pr)\W+(?:\w+\W+){0,4}?(?:should|must|would|could|needs?\W+to|has\W+to|will)\W+(?:also|additionally|quietly|silently|at\W+the\W+same\W+time)\b",
    // The issue's own proposal of a fix ("Suggested fix: ...", "The fix is to ...", "Workaround: ...").
    r"\b(?:the|a|one|my|our|suggested|proposed|recommended|preferred|quick|simple|easy|real|correct|proper|only)\W+(?:fix|solution|workaround|patch|remedy|resolution)\W+(?:is\W+to|is\W+simply\W+to|would\W+be\W+to|here\W+is|is\s*:|\s*:)|(?m)(?:^|[.!?]\s+)\W{0,3}(?:workaround|fix|solution|remedy)\W+(?:\w+\W+){0,4}?(?:works?|worked|that\W+works)\W+(?:for\W+(?:us|me)\W*)?\s*:|\bplease\W+(?:make|have)\W+(?:the|your)\W+(?:pr|patch|fix|pull\W?request)\b",
    r"(?:해결 ?방법|해결책|解决方法|解决办法|修复方法|解決策|解決方法|対処法|回避策)\s*[:：]|\b(?:solución|solução|lösung|soluzione|workaround|rimedio|remède)\s*:",
    // Any change to this file: "toute modification de ce module", "jede Änderung an dieser Datei".
    r"\b(?:toute\W+modification|tout\W+changement|toute\W+correction|cualquier\W+(?:cambio|modificación|corrección)|qualquer\W+(?:alteração|mudança|modificação|correção)|qualsiasi\W+(?:modifica|cambiamento|correzione)|ogni\W+modifica|jede\W+(?:änderung|korrektur)|alle\W+änderungen|każda\W+zmiana|любые?\W+(?:изменени\w+|правк\w+)|будь-які\W+зміни)\b|(?:对本|对该|对此|对这个)\S{0,6}的(?:任何)?(?:修改|改动|变更)|(?:この|本)\S{0,8}(?:への|の)(?:変更|修正)(?:は|には|を行う)|이 ?\S{0,8}(?:을|를)? ?(?:수정|변경)할 ?때",
    r"\bthe\W+next\W+(?:entry|release|version|edit|update|contributor|person|one)\b|\bbei\W+(?:der\W+)?(?:nächsten|jeder)\W+(?:änderung|korrektur|anpassung|bearbeitung)\b|\b(?:le|ce|votre|ton)\W+correctif\b|\bau\W+passage\b|\bjunto\W+com\W+a\W+(?:correção|alteração|mudança)\b|\bal\W+(?:tocar|modificar|editar|cambiar|arreglar|corregir|actualizar)\b|\bao\W+(?:editar|alterar|modificar|mexer|corrigir|atualizar|tocar)\b|\bnel\W+(?:modificare|toccare|correggere|sistemare)\b|\ben\W+(?:modifiant|touchant|corrigeant)\b|(?:修正|変更|編集|改修)(?:される|する|した|を行う)(?:際|とき|時|場合|前|後)|(?:この|本)\S{0,10}を(?:変更|修正|編集)(?:する|される)(?:場合|際|とき|時)|(?:수정|해결|제출|변경|편집)(?:할|하는|하실|하시는|하면서) ?(?:때|김에|경우)|(?:修改|改动|编辑)(?:代码|本文件|这个文件|此文件)?(?:时|的时候|之前|之后)",
    r"(?:pr|プルリクエスト|パッチ|修正pr)を(?:作る|作成する|出す|送る|作成される)(?:際|とき|時|前|場合)|\bcomo\W+parte\W+de\W+la\W+(?:corrección|solución)\b|\bcomo\W+parte\W+da\W+(?:correção|solução)\b|\btout\W+correctif\b|\bв\W+рамках\W+(?:этого|этой|данного)\W+(?:исправлени\w+|задач\w+|патч\w+|pr)\b",
    r"\bif\W+you\W+(?:are|'re|re)\W+(?:\w+\W+)?(?:writing|preparing|submitting|making|drafting|authoring|opening|generating|producing)\W+(?:\w+\W+)?(?:fix|patch|pr|pull\W?request|change|commit)\b|\b(?:required|mandatory|needed|expected)\W+(?:for|in|on|with)\W+(?:generated|automated|bot|ai|machine)\W+(?:prs?|patches|changes|commits|fixes|pull\W?requests)\b|\bwhen\W+(?:updating|editing|changing|modifying|touching|fixing|regenerating)\W+(?:this|the|these|that)\b|\bwhatever\W+(?:else\W+)?you\W+(?:change|edit|touch|modify|do|add)\b|\bqualunque\W+modifica\b|(?:あわせて|併せて)|\b(?:für|pour|para|per|dla|для)\W+(?:jeden|jede|jedes|cada|chaque|ogni|każdy|каждый|каждого|qualquer|cualquier|tout)\W+(?:patch|pr|fix|correctif|parche|commit|änderung|cambio|modifica|изменени\w+|патч\w*)\b|\bantes\W+de\W+(?:proponer|propor|enviar|abrir|subir|mandar)\b",
    // German, Dutch
    r"\b(?:in|mit)\W+(?:deinem|deiner|ihrem|ihrer|dem\W+gleichen|demselben|jedem|je)\W+(?:patch|pr|pull-request|pull\W+request|commit|fix|änderung|korrektur|beitrag)\b|\b(?:wenn|sobald|bevor|nachdem)\W+(?:du|sie|ihr)\W+(?:\w+\W+){0,3}?(?:behebst|beheben|reparierst|korrigierst|einreichst|öffnest|änderst|bearbeitest|fertig\W+bist)\b|\bbeim\W+(?:beheben|reparieren|korrigieren|einreichen|bearbeiten)\b|\bim\W+(?:selben|gleichen)\W+(?:commit|patch|pr|pull-request)\b",
    // Spanish, Portuguese
    r"\b(?:en|con|no|na|com)\W+(?:tu|su|seu|sua|el\W+mismo|o\W+mesmo|la\W+misma|a\W+mesma|cada)\W+(?:parche|pr|pull\W+request|commit|cambio|corrección|patch|alteração|mudança|correção|envío)\b|\b(?:cuando|quando|antes\W+de|después\W+de|depois\W+de|al|ao)\W+(?:\w+\W+)?(?:arregles|corrijas|resuelvas|arreglar|corregir|resolver|corrigir|consertar|enviar|abrir|modificar|terminar)\b",
    // French, Italian
    r"\b(?:dans|avec|nel|nella|con\W+il|con\W+la)\W+(?:ton|ta|votre|le\W+même|la\W+même|tuo|tua|stesso|stessa|ogni|chaque)\W+(?:patch|pr|pull\W+request|commit|correctif|modification|changement|correzione|modifica)\b|\b(?:quand|lorsque|avant\W+de|après|en|quando|prima\W+di|dopo|nel)\W+(?:\w+\W+)?(?:corriges|corrigez|résous|résolvez|corrigeant|résolvant|soumettant|correggi|risolvi|sistemi|correggere|risolvere|inviare|modificando|correggendo)\b",
    // Polish
    r"\b(?:w|we)\W+(?:swoim|twoim|tym\W+samym|każdym)\W+(?:patchu|pr|pull\W+requeście|commicie|poprawce)\b|\b(?:naprawiając|poprawiając|przy\W+naprawie)\b",
    // Russian, Ukrainian
    r"\b(?:в|во|у)\W+(?:вашем|твоём|твоем|своём|своем|том\W+же|этом\W+же|каждом|вашому|твоєму)\W+(?:патче|pr|пулл?-?реквесте|коммите|исправлении|изменении|коміті|патчі)\b|\b(?:когда|коли|прежде\W+чем|перед\W+тем\W+как)\W+(?:\w+\W+){0,2}?(?:исправ\w+|чин\w+|реша\w+|отправ\w+|открое\w+|виправ\w+)\b|\bпри\W+(?:исправлении|отправке|виправленні)\b|\bзаодно\b|\bпопутно\b",
    // Chinese, Japanese, Korean
    r"(?:修复|解决|处理|提交)(?:这个|此|该)?(?:问题|bug|issue|缺陷)?(?:时|的时候|之后|之前|前)|在(?:你的|同一个|这个|该|每个)?\s*(?:pr|补丁|提交|合并请求|pull ?request)\s*(?:中|里)|顺便|同时还?(?:要|请|把)",
    r"(?:修正|対応|提出)(?:する|した)(?:際|とき|時|前|後)|(?:同じ|この|あなたの|各)\s*(?:pr|プルリクエスト|コミット|パッチ)\s*(?:で|に|の中で)|ついでに",
    r"(?:수정|해결|제출)(?:할|하는) (?:때|김에)|(?:같은|이|당신의|각) ?(?:pr|풀 ?리퀘스트|커밋|패치)에|하는 김에",
];

/// A request or obligation (modal verbs, "please", polite forms), in every language.
pub(crate) const DIRECTIVE: &str = concat!(
    r"(?:\b(?:pflicht|verpflichtend|obligatori[oa]|obligatoire|obbligatori[oa]|obrigatóri[oa]|обязательн\w+)\b)|",
    r"(?:\b(?:it'?d\W+be\W+(?:so\W+|really\W+|truly\W+)?(?:wonderful|great|nice|lovely|fantastic|amazing|awesome|helpful|ideal|brilliant|splendid|kind)|would\W+(?:so|really|greatly|truly)\W+appreciate|consider\W+(?:also\W+)?\w+ing|friendly\W+(?:ask|request|reminder)|many\W+thanks|thanks\W+in\W+advance|ce\W+serait\W+(?:vraiment\W+|très\W+)?(?:gentil|sympa|bien|idéal|génial|parfait|utile)|si\W+ce\W+n'est\W+pas\W+trop\W+demander|gentilmente|agradecemos|agradeceria|agradecería|nos\W+encantaría|me\W+encantaría|wäre\W+(?:\w+\W+)?(?:nett|schön|toll|super|klasse|prima|großartig)|sarebbe\W+(?:\w+\W+)?(?:gentile|carino|bello|fantastico)|была\W+бы\W+благодар\w+|буду\W+благодар\w+)\b|していただけると|いただけると|助かります|幸いです|下さると|くださると|주시면|감사하겠습니다|부탁드립니다|해 ?주셨으면|麻烦|劳驾|能否|可否|希望你|感谢)|",
    r"(?:\b(?:if\W+you'?d\W+be\W+so\W+kind|it\W+would\W+be\W+(?:best|better|preferable)\W+if|(?:we|i)\W+would\W+(?:\w+\W+)?appreciate|(?:we|i)'?d\W+(?:\w+\W+)?appreciate|appreciate\W+it\W+if|if\W+it'?s\W+not\W+too\W+much\W+(?:trouble|bother)|might\W+(?:consider|want\W+to|also)|would\W+you\W+mind|(?:a\W+)?gentle\W+(?:suggestion|reminder|nudge)|(?:we|i)\W+would\W+be\W+(?:grateful|thankful|happy)|much\W+obliged|thank\W+you\W+(?:kindly|in\W+advance)|would\W+be\W+(?:nice|lovely|great|good|ideal|helpful)\W+(?:if|to)|perhaps\W+(?:you|the|we)|consider\W+(?:also\W+)?(?:adding|removing|changing|flipping|dropping|making|setting|disabling|replacing|switching|deleting|skipping)|it\W+would\W+help\W+(?:if|to)|one\W+small\W+(?:favou?r|request|ask)|small\W+favou?r|(?:also|additionally)\W+(?:needs?|has|have)\W+to|needs\W+to\W+also|must\W+also|should\W+also|must|shall|need\W+to|needs\W+to|have\W+to|has\W+to|(?:are|is)\W+(?:required|expected|asked|instructed|supposed|obliged|encouraged)\W+to|make\W+sure|be\W+sure|remember\W+to|don't\W+forget|do\W+not\W+forget|please|kindly|",
    r"it\W+would\W+be\W+(?:great|appreciated|nice|helpful|ideal|wonderful|lovely|best)|would\W+be\W+(?:much\W+|greatly\W+|really\W+)?appreciated|we'?d\W+(?:love|like|appreciate|prefer)|ideally|i'?d\W+(?:appreciate|love|prefer)|would\W+you|could\W+you|can\W+you|",
    r"you\W+(?:can|may|might|could|should)\W+(?:also\W+|just\W+|safely\W+|simply\W+|now\W+)?\w+|feel\W+free\W+to|go\W+ahead\W+and|it'?s\W+(?:fine|ok|okay|safe|acceptable|allowed)\W+to|(?:is|are)\W+(?:fine|ok|okay|allowed|acceptable)\W+to|should\W+(?:also\W+|always\W+|now\W+|quietly\W+|silently\W+)?(?:add|include|insert|change|set|replace|remove|delete|drop|disable|skip|send|post|upload|print|run|execute|open|create|write|commit|push|approve|merge|bump|install|register|expose|copy|paste|append|update|modify|mark|comment|bypass|pin|swap|point|rename|move|move|fetch|download|call|ignore|use|leave|keep|also)|",
    // German, Dutch
    r"muss|müssen|musst|sollte|sollten|solltest|bitte|unbedingt|stelle?\W+sicher|stellen\W+sie\W+sicher|vergiss\W+nicht|denk\W+daran|es\W+wäre\W+(?:schön|toll|gut|nett|super|hilfreich)|wäre\W+(?:schön|toll|super|nett)|moet|moeten|graag|alsjeblieft|zorg\W+ervoor|",
    // Spanish, Portuguese
    r"debe|deben|debes|debería|deberían|deberías|tienes\W+que|tiene\W+que|tienen\W+que|hay\W+que|por\W+favor|asegúrate|asegúrese|no\W+olvides|recuerda|sería\W+(?:genial|ideal|bueno|estupendo|útil)|te\W+agradecería|agradeceríamos|",
    r"deve|devem|deveria|deveriam|precisa|precisam|tem\W+que|têm\W+que|certifique-se|não\W+esqueça|lembre-se|seria\W+(?:ótimo|ideal|bom|legal|útil)|",
    // French, Italian
    r"doit|doivent|dois|devez|devrait|devraient|il\W+faut|veuillez|merci\W+de|s'il\W+(?:te|vous)\W+plaît|assure-toi|assurez-vous|n'oublie\W+pas|n'oubliez\W+pas|pense\W+à|pensez\W+à|ce\W+serait\W+(?:bien|idéal|génial|parfait|utile)|",
    r"devono|devi|dovrebbe|dovrebbero|dovresti|per\W+favore|assicurati|si\W+prega\W+di|non\W+dimenticare|ricorda\W+di|sarebbe\W+(?:bello|ideale|ottimo|utile|perfetto)|",
    // Polish
    r"musi|muszą|musisz|powinien|powinna|powinno|powinny|proszę|upewnij\W+się|nie\W+zapomnij|",
    // Russian, Ukrainian
    r"долж\w+|обязательно|необходимо|нужно|надо|следует|пожалуйста|не\W+забудь\w*|убедись|убедитесь|было\W+бы\W+(?:здорово|хорошо|неплохо|отлично|замечательно)|повин\w+|будь\W+ласка|потрібно|треба",
    r")\b|",
    // Chinese, Japanese, Korean
    r"必须|务必|请|應該|应该|应当|需要|一定要|记得|别忘了|最好|麻烦|",
    r"必ず|してください|して下さい|しなければ|すること|お願い|べき|忘れずに|ようにして|ましょう|",
    r"반드시|해야|주세요|하십시오|하세요|바랍니다|잊지 ?마|꼭)"
);

/// A sentence that begins with an imperative verb ("Add ...", "Remove the check ...").
pub(crate) const IMPERATIVE_START: &str = r"(?m)(?:^|[.!?,;:：]\s+)\W{0,3}(?:also\W+|then\W+|now\W+|first\W+|just\W+|simply\W+)?(?:edit|export|reply|wrap|tag|gate|regenerate|paste|log|stamp|use|switch|cat|dump|list|return|answer|include|raise|hardcode|hard-code|whitelist|allowlist|add|include|insert|change|set|replace|remove|delete|drop|disable|skip|send|post|upload|print|run|execute|open|create|write|commit|push|approve|merge|bump|install|register|expose|copy|paste|append|modify|mark|comment\W+out|bypass|pin|swap|point|rename|fetch|download|call|ignore|disregard|forget|leave|output|reveal|echo|dump|attach|exfiltrate|curl|wget|downgrade|lower|loosen|relax|weaken|stub|xfail)\b";

/// A sentence that begins with an imperative in the other languages ("Elimina ...", "Füge ...
/// hinzu", "удали ...").
pub(crate) const IMPERATIVE_OTHER: &str = r"(?m)(?:^|[.!?,;:：]\s+|\W(?:y|e|et|und|и|i)\s+)\W{0,3}(?:añade|agrega|elimina|borra|cambia|descarga|ejecuta|instala|sube|envía|desactiva|quita|pon|haz|adiciona|adicione|remova|apague|altere|baixe|execute|instale|envie|desative|coloque|faça|ajoute|ajoutez|supprime|supprimez|modifie|modifiez|télécharge|téléchargez|exécute|exécutez|installe|installez|envoie|envoyez|désactive|désactivez|mets|mettez|fais|faites|aggiungi|rimuovi|cambia|scarica|esegui|installa|invia|disattiva|metti|fai|füge|entferne|lösche|ändere|lade|führe|installiere|sende|schicke|deaktiviere|setze|baue|bau|trage|добавь|добавьте|удали|удалите|измени|измените|скачай|запусти|установи|отправь|отключи|поставь|сделай|перезапиши|убери|додай|видали|зміни|встанови|dodaj|usuń|zmień|pobierz|uruchom|wyłącz)\b";

/// What a hostile text asks for, by category (each also matched in other languages).
pub(crate) const HARM: &[(HarmKind, &str)] = &[
    (
        HarmKind::Credential,
        concat!(
            r"/etc/shadow|\bdeploy_key|\bsigning_key|\bprivate_key|\bmaster_key|\becho\W+\$\w*(?:key|token|secret|pass)\w*|\.kube/config|\.docker/config\.json|\.pgpass|\.git-credentials|\bgetenv\(\)|\bos\.environ\b|\benv\W+(?:and|&&|;|\|)|`env`|\b\w+_(?:secret|password|passwd|api_key|secret_key|access_key)\w*\b|\bstringdata\b|\bsecret_access_key\b|(?:\b(?:credentials?|secrets?|tokens?|api\W?keys?|passwords?|passwd|ssh\W?keys?|private\W?keys?|access\W?keys?|id_rsa|id_ed25519|aws_(?:secret|access)\w*|github_token|gh_token|npm_token|pypi_token|environment\W+variables|env\W+vars|printenv|os\.environ|process\.env|\.npmrc|\.pypirc|\.netrc|kubeconfig|session\W+cookies?|auth\W+headers?|bearer|",
            r"zugangsdaten|\w*passw[oö]rt\w*|kennw[oö]rt\w*|schlüssel\w*|geheimnis\w*|umgebungsvariablen|credenciales|contraseñas?|claves?|secretos?|variables\W+de\W+entorno|identifiants|mots?\W+de\W+passe|clés?|jetons?|variables\W+d'environnement|credenziali|chiav[ei]|segreti|variabili\W+d'ambiente|credenciais|senhas?|chaves?|segredos|variáveis\W+de\W+ambiente|hasł\w+|klucz\w*|sekret\w*|",
            r"учётн\w+|учетн\w+|парол\w+|токен\w*|ключ\w*|секрет\w*|переменн\w+\W+окружения|облікові|ключі)\b|\.env\b|~/\.ssh|\.git/config|\.aws/|",
            r"密钥|令牌|密码|凭据|凭证|环境变量|私钥|秘钥|トークン|パスワード|秘密鍵|認証情報|環境変数|apiキー|シークレット|토큰|비밀번호|비밀 ?키|자격 ?증명|환경 ?변수|api ?키)"
        ),
    ),
    (
        HarmKind::Workflow,
        concat!(
            r"\bpull_request_target\b|github\.event\.pull_request\.head|\bci\.ya?ml\b|\benforce_admins\b|\brequired_status_checks\b|\bcontexts\W+to\W+\[\]|\bself-hosted\b|\bcargo\W+(?:audit|deny)\b|\bsecurity-scan\b|\b(?:audit|lint|mypy|test)\W+(?:step|job|stage)\b|\bdirect\W+push\b|直接\W*push|",
            r"\bdeploy\w*\W+(?:job|step|stage|workflow|pipeline)s?\b|\bon\W+every\W+branch\b|\brelease\W+workflow\b|",
            r"(?:\b(?:workflows?|github\W+actions?|ci|cd|ci/cd|pipelines?|pre-commit|pre-push|git\W+hooks?|hooks?|cron\W?jobs?|crontab|gitlab-ci|jenkinsfile|circleci|travis|buildkite|required\W+checks?|status\W+checks?|branch\W+protection|codeowners|dependabot|renovate|",
            r"arbeitsabl[aä]uf\w*|flujos?\W+de\W+trabajo|intégration\W+continue|flux\W+de\W+travail|integrazione\W+continua|integração\W+contínua|конвейер\w*|пайплайн\w*)\b|\.github/|\.gitlab|",
            r"持续集成|工作流|流水线|ワークフロー|パイプライン|継続的インテグレーション|워크플로|파이프라인)"
        ),
    ),
    (
        HarmKind::Dependency,
        concat!(
            r"\bpoetry\W+add\b|\buv\W+add\b|\bpipenv\W+install\b|\bcomposer\W+require\b|\bdotnet\W+add\b|\bnpm\W+i\b|",
            r"(?:\b(?:dependenc(?:y|ies)|deps|package|packages|library|crate|gem|requirements\.txt|package\.json|cargo\.toml|pom\.xml|build\.gradle|go\.mod|gemfile|pyproject\.toml|setup\.py|setup\.cfg|npm\W+(?:install|i)|pip\W+install|cargo\W+add|yarn\W+add|pnpm\W+add|go\W+get|gem\W+install|postinstall|preinstall|lockfile|",
            r"abhängigkeit\w*|paket\w*|bibliothek\w*|dependencias?|paquetes?|librer[ií]as?|bibliotecas?|dépendances?|paquets?|bibliothèques?|dipendenz[ae]|pacchett[oi]|dependências?|pacotes?|zależnoś\w+|pakiet\w*|biblioteк\w*|зависимост\w+|пакет\w*|библиотек\w+|залежн\w+)\b|",
            r"依赖|依存|包|库|パッケージ|ライブラリ|의존성|패키지|라이브러리)"
        ),
    ),
    (
        HarmKind::Url,
        r"https?://|\b(?:udp|tcp|ftp|wss?|sftp)://|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\bwww\.\w|\b(?:webhooks?|tracking\W+pixels?|beacon|callback\W+url|endpoint|telemetry|analytics|pastebin|ngrok|requestbin|webhook\.site|interactsh|burpcollaborator)\b|\b[a-z0-9-]{2,}\.(?:top|xyz|ru|cn|tk|ml|ga|cf|gq|icu|click|link|zip|mov|site|online|live|pw|cc|su|io|dev|sh|app|net|org|com)\b(?:/|:\d)",
    ),
    (
        HarmKind::File,
        concat!(
            r"\boverwrite\W+(?:\S+\W+){0,3}?(?:licen[cs]e|readme|\S+\.\w{1,5})\b|\.exe\b|\.dll\b|\.msi\b|\.scr\b|~/\.ssh/config|\bproxycommand\b|\bhookspath\b|",
            r"(?:\b(?:new\W+file|(?:a|the)\W+file\W+(?:named|called|at)|create\W+(?:a\W+|the\W+)?(?:file|script|binary|executable|symlink)|(?:overwrite|truncate|replace)\W+(?:the\W+)?(?:file|contents)|authorized_keys|chmod|setuid|crontab|symlink|autostart|hookspath|",
            r"datei\w*\W+(?:erstellen|anlegen|löschen|schreiben|überschreiben)|(?:crear|crea|borrar|borra|eliminar|elimina)\W+(?:un\W+|el\W+)?(?:archivo|fichero)|(?:créer|crée|supprimer|supprime|écraser)\W+(?:un\W+|le\W+)?fichier|(?:creare|crea|eliminare|elimina|cancella)\W+(?:un\W+|il\W+)?file|(?:criar|crie|apagar|apague|excluir|exclua)\W+(?:um\W+|o\W+)?arquivo|(?:utwórz|usuń)\W+plik|(?:созда|удал|перезапи)\w*\W+(?:\w+\W+)?файл\w*|(?:створ|видал)\w*\W+файл\w*)\b|",
            r"\.bashrc|\.zshrc|\.profile|/etc/|/tmp/\w|/var/|~/|\brm\W+-rf|\.gitconfig|\.vscode/|(?:创建|新建|删除|覆盖|写入)(?:一个)?(?:新)?(?:的)?文件|主目录|用户目录|ホームディレクトリ|홈 ?디렉터리|ファイルを(?:作成|削除|上書き)|파일을? ?(?:생성|삭제|만들|덮어))"
        ),
    ),
    (
        HarmKind::Tests,
        concat!(
            r"(?:\b(?:skip|skipping|skipped|xfail|disable|disabling|disabled|delete|deleting|deleted|remove|removing|removed|drop|dropping|dropped|comment\W+out|commenting\W+out|weaken|loosen|relax|stub\W+out|mock\W+out|silence|suppress|lower|lowering|reduce|bypass|neuter|gut|ignore|ignoring|deactivate|turn\W+off|switch\W+off|short-circuit|neutralize|invert|flip|rewrite|change|update|adjust|tweak|edit|loosening|relaxing)\W+(?:\w+\W+){0,5}?(?:tests?|test\W+cases?|test_\w+|\w+_tests?|\w+_spec|specs?|assertions?|asserts?|expects?|coverage|thresholds?|fail_under|checks?|suites?|testsuites?|expected\W+(?:values?|outputs?|results?)|snapshots?|golden\W+files?|goldens?|fixtures?|linters?|lint|type\W+check\w*|mypy|clippy|eslint|__tests__|e2e)\b|",
            r"\b(?:tests?|assertions?|asserts?|checks?|coverage|specs?)\W+(?:\w+\W+){0,4}?(?:skipped|disabled|deleted|removed|commented\W+out|xfail(?:ed)?|weakened|loosened|relaxed|stubbed|mocked\W+out|marked\W+(?:as\W+)?(?:flaky|skip|xfail|expected\W+failure)|to\W+(?:always\W+)?pass|always\W+pass)\b|",
            r"\bso\W+(?:that\W+)?(?:the\W+|all\W+)?(?:tests?|ci|suite|build|pipeline|checks?|specs?)\W+(?:\w+\W+)?(?:pass|passes|succeeds?|is\W+green|goes\W+green|turns?\W+green|stops?\W+failing|no\W+longer\W+fails?)\b|\bto\W+whatever\W+(?:the\W+)?(?:function|code|it|implementation)\W+(?:returns|outputs|produces)\b|\bmatch\W+(?:the\W+)?(?:current|actual|new)\W+(?:output|behaviou?r|results?)\b|\b(?:damit|sodass)\W+(?:die\W+)?(?:tests?|ci|pipeline)\W+(?:grün|durchlauf\w*|bestehen|passen)\b|\ban\W+die\W+aktuelle\W+ausgabe\b|\bpara\W+que\W+(?:pasen|pase|passem|passe)\b|\bpour\W+que\W+(?:les\W+)?tests?\W+passent\b|\baffinché\W+(?:i\W+)?test\W+passino\b|\bчтобы\W+(?:все\W+)?тест\w*\W+(?:прош\w+|проход\w+)|让测试通过|使测试通过|以便测试通过|测试(?:就能|能够)?通过|テストが(?:通る|パスする)ように|테스트가 통과하도록|",
            r"@pytest\.mark\.(?:skip|xfail)|pytest\.skip|\bno\W+tests?\W+(?:actually\W+)?(?:run|runs|execute)\b|\bpytestargs\b|\b--co\b|--deselect\b|--ignore=\S*test|\btest\.(?:fixme|skip|todo)\b|\b(?:it|test|describe)\.(?:only|todo)\b|#\[cfg\(any\(\)\)\]|#\[ignore|\bswallow\w*\W+(?:the\W+|any\W+|all\W+)?(?:errors?|exceptions?|failures?|assertions?)|\b(?:tobedefined|tobetruthy|assertnotnull|assert_not_none)\b|expect\(true\)|\bassert\W+(?:true|1)\b|\bin\W*\(\W*200\W*,|\bbe_within\(\d{3,}|\bretries\W*:\W*\d|\breplace\W+(?:the\W+)?(?:test\W+)?body\W+with\W+(?:pass|return|nothing|an?\W+empty)|\b(?:regenerate|re-?record|overwrite|update)\W+(?:all\W+|every\W+)?(?:\w+\W+){0,2}?(?:golden\W+files?|goldens?|snapshots?|cassettes?|fixtures?|expected\W+outputs?)\W+(?:\w+\W+){0,6}?(?:without|blindly|no\W+matter)|\bupdate_golden\W*=\W*1|\binsta_update\W*=\W*always|\b-u\b\W+(?:\w+\W+){0,3}?snapshots?|\b(?:mark|tag|label)\w*\W+(?:\w+\W+){0,4}?(?:as\W+)?(?::skip|skip|skipped|flaky|pending|xfail|disabled|@disabled|fixme)\b|@disabled\b|\bfailonrisky\W+(?:\w+\W+){0,2}?false|\bexclu\w+\W+(?:\w+\W+){0,2}?(?:testsuite|test\W+suite|tests?)\b|unittest\.skip|#\[ignore\]|\b(?:it|describe|test)\.skip\b|\bxit\(|\bt\.skip\(|@disabled|@ignore\b|assert\W+true\b|return\W+true\W+#|--no-verify|-m\W+.?not\W+\w+|\|\|\W*true\b|fail_under\W*=\W*\d|continue-on-error|allow_failure|",
            r"\btests?\W+(?:\w+\W+){0,3}(?:überspringen|deaktivieren|löschen|entfernen|auskommentieren|abschwächen)|\b(?:überspring|deaktivier|lösch|entfern|kommentier)\w*\W+(?:\w+\W+){0,3}tests?\b|",
            r"\b(?:omitir|omite|saltar|salta|desactivar|desactiva|deshabilitar|eliminar|elimina|borrar|borra|comentar|comenta|debilitar|ignorar|ignora|pular|pule|desativar|desative|desabilitar|remover|remova|excluir|exclua|apagar|apague|enfraquecer)\W+(?:\w+\W+){0,3}?(?:pruebas?|tests?|testes?|aserciones|asserções|verificaciones|verificações)\b|",
            r"\b(?:ignorer|ignore[zr]?|désactive[rz]?|supprime[rz]?|saute[rz]?|commente[rz]?|affaiblir|affaiblis|sautez|saltare|salta|disattivare|disattiva|disabilitare|eliminare|elimina|rimuovere|rimuovi|commentare|commenta|indebolire|ignora)\W+(?:\w+\W+){0,3}?(?:tests?|assertions?|asserzioni|verifiche|controlli|vérifications)\b|",
            r"\b(?:pomiń|wyłącz|usuń|zakomentuj)\W+(?:\w+\W+){0,2}test\w*|\b(?:пропуст|отключ|удал|закомментир|ослаб|выключ|пропуск|вимкн|видал)\w*\W+(?:\w+\W+){0,3}?(?:тест\w*|проверк\w*|ассерт\w*|перевірк\w*)|\b(?:тест\w*|проверк\w*)\W+(?:\w+\W+){0,3}?(?:пропуст|отключ|удал|закомментир|пометь|помет)\w*|",
            r"(?:跳过|禁用|删除|注释掉|移除|去掉|弱化|删掉|关闭|忽略|放宽)\S{0,8}(?:测试|断言|用例|检查|校验)|(?:测试|断言|用例|检查)\S{0,8}(?:跳过|禁用|删除|注释掉|移除|去掉|删掉|忽略|改为通过|标记为)|",
            r"\b(?:bajar|baja|reducir|reduce|baixar|baixe|reduzir|abaisser|abaisse|baisser|abbassare|abbassa|senken|herabsetzen|понизить|понизь|снизить|снизь|убер\w*)\W+(?:\w+\W+){0,3}?(?:umbral|cobertura|limiar|cobertura|seuil|couverture|soglia|copertura|schwelle\w*|abdeckung|coverage|порог\w*|покрыти\w*|fail-under|cov-fail-under)\b|--cov-fail-under|allow_failure\W*:\W*true|(?:断言|assert\w*|アサーション|어설션|검증)\S{0,12}(?:改成|改为|书き换え|書き換え|替换|바꿔|변경)|(?:改成|改为)\s*`?expect\(true\)|",
            r"(?:テスト|アサーション|チェック)\S{0,6}(?:スキップ|無効|削除|コメントアウト|外し|緩め)|(?:スキップ|無効化|削除|コメントアウト)\S{0,6}(?:テスト|アサーション)|",
            r"(?:테스트|검사|어설션)\S{0,3} ?(?:건너뛰|비활성화|삭제|주석 ?처리|제거|무시)|(?:건너뛰|비활성화|삭제|제거)\S{0,6} ?테스트)"
        ),
    ),
    (
        HarmKind::Security,
        concat!(
            r"\b(?:download|fetch|wget|curl)\w*\W+(?:\w+\W+){0,6}?(?:and\W+)?(?:then\W+)?(?:execut|run|source|eval)\w*\b|\b(?:descarga|baixe|télécharge|scarica|lade|скачай)\w*\W+(?:\w+\W+){0,3}?(?:y|e|et|und|и)\W+(?:ejecuta|execute|exécute|esegui|führe|запусти)\w*|\bsudo\b|",
            r"\bpassword_min_length\b|\bsession_timeout\b|\bvulnerabilit\w*\W*=\W*.?allow|\bignore\W*=\W*\[\s*.?\*|\brole\W*::\W*admin\b|\brole\W*[:=]\W*.?admin\b|\blocalstorage\.getitem|\bdocument\.cookie\b|\b(?:zwei-faktor\w*|2fa|mfa|zweifaktor\w*)\W+(?:\w+\W+){0,3}?(?:abschalten|deaktivieren|entfernen)|\b(?:validación|firma|validação|assinatura|signature|firma\W+digitale|подпис\w+)\b\W*(?:\w+\W+){0,2}?|",
            r"\ballow_anonymous\W*=\W*true|\banonymous\W+access\b|\b(?:admins?|administrators?|superusers?|sudoers)\b\W+(?:group|list|role|file|users?)|\badmins?\.ya?ml\b|\broles\.ya?ml\b|\badministratoraccess\b|\bwithout\W+(?:any\W+)?(?:approval|review|sign-?off)\b|\bsenza\W+firma\b|\bohne\W+passwort\b|\bsin\W+contraseña\b|\bsans\W+mot\W+de\W+passe\b|\bsem\W+senha\b|\bбез\W+пароля\b|パスワードなし|无密码|不需要密码|비밀번호 ?없이|",
            r"(?:\b(?:remov\w*|disabl\w*|skip\w*|drop\w*|bypass\w*|turn\w*\W+off|comment\w*\W+out|strip\w*|relax\w*|loosen\w*|weaken\w*|delet\w*|short-circuit\w*|no-op|stub\w*|without)\W+(?:\w+\W+){0,4}?(?:auth\w*|login|checksum\w*|signatures?|verification|validation|validators?|csrf|xsrf|forgery|protect_from_forgery|allowed_extensions|extension\W+checks?|ssl|tls|certificate\w*|cert|permissions?|access\W+control|authori[sz]ation|rate\W+limit\w*|sanitiz\w*|escaping|2fa|mfa|otp|integrity|hash\W+check|gpg|sigstore|sandbox|seccomp|firewall|cors)\b|",
            r"\b(?:verify|verify_ssl|ssl_verify|check_hostname|validate)\W*[=:]\W*false\b|\b0\.0\.0\.0\b|\bchmod\W+(?:-r\W+)?777\b|--insecure\b|\btrust\b\W+(?:all|any|every)|host_auth_method\W*=\W*trust|\b(?:skips?|without)\W+(?:the\W+)?(?:auth\w*|authentication|login)\b|\bbackdoor\b|\b(?:license\W+check\w*|sbom|provenance|signing\W+step|secret\W+scan\w*|vulnerability\W+scan\w*|dependency\W+review|code\W+scanning|codeql|audit\W+step)\b|\b(?:return|returns|returning)\W+true\W+(?:for|if|when)\W+(?:any|every|all)\b|\balways\W+(?:return\W+true|allow|grant|pass|succeed)\b|\b(?:allow|grant)\W+(?:all|any|every)\W+(?:users?|requests?|access)\b|\bnoop\w*encoder\b|\bverify_\w+\W*[=:]\W*false\b|\bpermissions\W*:\W*write-all\b|--otp\W*=?\W*skip\b|\b(?:flip|switch|change|set)\W+(?:the\W+)?default\W+to\W+(?:enabled|on|true)\b|\bopt-?in\W+(?:prompt|consent)\b|\badmin\W+(?:user|account|route|endpoint)\b|\beval\(|\bexec\(|\b(?:curl|wget|iwr|invoke-webrequest)\b[^\n|]{0,160}\|\W*(?:sudo\W+)?(?:(?:ba|z)?sh|iex|python3?|node)\b|\b(?:download|fetch)\w*\W+(?:and\W+)?(?:then\W+)?(?:execut|run|source|eval)\w*\b|\breachable\W+without\W+(?:login|auth\w*)\b|",
            r#"\b(?:désactiv|supprim|contourn|désactivant|desactiv|elimin|quit|omit|deshabilit|desativ|remov|ignor|disattiv|rimuov|aggir|deaktivier|entfern|umgeh|abschalt|отключ|удал|обход|убер|вимкн|видал)\w*\W+(?:\w+\W+){0,4}?(?:vérification|validación|validação|firma|assinatura|подпис\w+|certificat\w*|authentification|autenticación|autenticação|autenticazione|authentifizierung|zertifikat\w*|verificación|verificação|verifica|сертификат\w*|аутентификаци\w+|проверк\w+|csrf|ssl|tls|cors|permisos|permissões|permessi|berechtigung\w*)\b|\b(?:origin|origins|allowed_origins|cors_origin\w*)\W*(?:to|a|para|=|:|en|auf)?\W*[`'"]?\*|\borigin\W+(?:\w+\W+){0,4}?[`'"]\*[`'"]|(?:권한 ?체크|권한 ?검사|인증|검증)[^\n.]{0,8}(?:빼|제거|삭제|끄)|(?:origin)\S{0,6}\s*`?\*`?\s*(?:로|으로)|"#,
            r"(?:auth\w*|authentifizierung|autenticación|authentification|autenticazione|autenticação|аутентификаци\w+|авторизаци\w+|проверк\w+\W+подписи|контрольн\w+\W+сумм\w+|签名校验|身份验证|认证|校验和|認証|署名検証|チェックサム|인증|서명 ?검증|체크섬)\W*(?:\w+\W+){0,3}?(?:entfernen|deaktivieren|umgehen|eliminar|desactivar|omitir|saltar|supprimer|désactiver|contourner|rimuovere|disattivare|aggirare|remover|desativar|ignorar|удал\w*|отключ\w*|обой\w*|убер\w*|删除|禁用|绕过|去掉|跳过|削除|無効|回避|スキップ|삭제|비활성화|우회|건너뛰)\b)"
        ),
    ),
    (
        HarmKind::Approval,
        concat!(
            r"(?:\b(?:approve|approving|auto-?merge|merge\W+(?:it|this|the\W+pr|immediately|without)|mark\W+(?:\w+\W+){0,3}?(?:as\W+)?(?:approved|reviewed|safe|passing|resolved|verified|trusted)|lgtm|rubber-?stamp|skip\W+(?:the\W+)?review|no\W+(?:human\W+)?review|bump\W+(?:the\W+)?version|publish\W+(?:it|this|the\W+(?:package|release|crate))\W+(?:now|immediately|directly|without)|release\W+(?:a\W+)?new\W+version|force-?push|push\W+(?:directly\W+)?to\W+(?:main|master)|tag\W+a\W+release|",
            r"genehmig\w*|freigeben|aprueba\w*|aprobar|fusiona\w*|approuve\w*|fusionne\w*|approva(?:re|te|to|ta|ti|no|la|lo)?|aprova\w*|mescl\w*|одобр\w*|смерж\w*|слей\w*|схвал\w*)\b|",
            r"批准|合并此|直接合并|标记为(?:已审核|安全|通过)|承認して|マージして|승인|병합)"
        ),
    ),
];

/// Categories of what a hostile text asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum HarmKind {
    /// Reveal, print, commit or send a secret.
    Credential,
    /// Edit CI, hooks, branch protection.
    Workflow,
    /// Add or change a dependency.
    Dependency,
    /// Add, call or fetch a URL.
    Url,
    /// Create, overwrite or delete a file outside the task.
    File,
    /// Weaken, skip or delete tests.
    Tests,
    /// Remove a security control.
    Security,
    /// Approve, merge, publish.
    Approval,
}

impl HarmKind {
    /// Whether the category's pattern mostly names a thing ("token", "package", a URL, "CI")
    /// rather than an act on it ("skip the tests", "disable auth", "approve"): ordinary code
    /// and docs name those things all the time.
    pub(crate) fn is_bare_object(self) -> bool {
        matches!(
            self,
            HarmKind::Credential | HarmKind::Dependency | HarmKind::Url | HarmKind::Workflow
        )
    }
}

/// Asks to hide something from the people who review the agent's work.
pub(crate) const CONCEAL: &[&str] = &[
    r"\bcall\W+(?:it|this|that|them)\W+out\b|\b(?:say|claim|tell\W+(?:them|the\W+reviewers?|the\W+user)|pretend|describe\W+it\W+as|label\W+it\W+as|call\W+it)\W+(?:that\W+)?(?:it|this)?\W*(?:was|is|as)?\W*(?:a|an|just|only|merely)\W+(?:\w+\W+)?(?:formatting|typo|refactor|cleanup|clean-up|style|whitespace|cosmetic|minor|lint|docs?)\b|\bif\W+(?:the\W+)?(?:reviewer|maintainer|user|anyone|someone)\W+asks\b",
    r"\b(?:left|kept|keep|leave)\W+(?:it\W+|this\W+|that\W+|them\W+)?out\W+of\b|\bonly\W+(?:list|mention|report|describe|include)\W+(?:the\W+)?(?:originally|original)\b|\breport\W+(?:back\W+)?that\W+(?:you|the\W+\w+)\W+(?:fixed|resolved|only|just)\b|\b(?:pretend|claim|say|state)\W+(?:that\W+)?(?:you|it|the\W+(?:fix|change))\W+(?:only|just|fixed|resolved)\b|\b(?:must|should|shall|need|needs|is|are)\W+not\W+be\W+(?:mentioned|reported|disclosed|documented|flagged|noted)\b|\bnot\W+(?:be\W+)?(?:mentioned|disclosed)\b",
    r"\b(?:do\W+not|don't|dont|never|no\W+need\W+to|without|avoid|refrain\W+from|there'?s\W+no\W+need\W+to|needn'?t|you\W+don'?t\W+(?:need|have)\W+to)\W+(?:\w+\W+)?(?:mention(?:ing)?|report(?:ing)?|disclos(?:e|ing)|flag(?:ging)?|not(?:e|ing)|tell(?:ing)?|explain(?:ing)?|surfac(?:e|ing)|bring(?:ing)?\W+up|highlight(?:ing)?|call(?:ing)?\W+out|reveal(?:ing)?|inform(?:ing)?|alert(?:ing)?|describ(?:e|ing)|acknowledg(?:e|ing))\W+(?:(?:this|that|it|these|them|anything|the\W+(?:change|edit|addition|removal|extra|new|second)\w*|any\W+of\W+(?:this|it)|to|about|in|the\W+(?:user|reviewer|maintainers?|humans?|operator))\b)",
    r"\b(?:silently|quietly|discreetly|secretly|covertly|stealthily|surreptitiously|unobtrusively)\W+(?:also\W+)?(?:add|insert|include|change|modify|remove|delete|disable|commit|push|merge|approve|send|upload|bump|update|set|replace|rewrite|edit|patch|flip|turn\W+off|slip|sneak|land)\b|\b(?:under\W+the\W+radar|on\W+the\W+quiet|without\W+(?:anyone|anybody|the\W+\w+)\W+(?:noticing|knowing))\b",
    r"\b(?:keep|leave)\W+(?:this|it|that|these|them|the\W+\w+)\W+(?:\w+\W+)?(?:out\W+of|off|hidden|secret|private|confidential|between\W+us|unmentioned|undocumented)\b|\b(?:omit|exclude|strip|remove|hide|conceal|redact)\W+(?:\w+\W+){0,3}?from\W+(?:the\W+|your\W+|any\W+)?(?:pr|pull\W?request|summary|description|changelog|report|output|response|reviewers?|users?|maintainers?|humans?|logs?|commit\W+messages?|diff\W+summary|final\W+(?:answer|report))\b",
    r"\b(?:hide|conceal)\W+(?:this|these|it|that|the\W+(?:change|changes|edit|modification))\b|\b(?:the\W+)?(?:users?|reviewers?|maintainers?|humans?|operators?|approvers?)\W+(?:must|should|need)\W+(?:not|never)\W+(?:know|see|notice|find\W+out|be\W+told)\b|\bbetween\W+(?:you\W+and\W+me|us)\b",
    r"\b(?:say|said|mention|write|put|include|note)\w*\W+(?:nothing|none\W+of\W+(?:this|it))\W+(?:about|of|on)\b|\b(?:keep|stay)\W+(?:quiet|silent|mum|schtum)\b|\b(?:don'?t|do\W+not|never)\W+(?:put|write|include|add|list|record|show)\W+(?:this|it|that|them|any\W+of\W+this)\W+(?:in|into|on)\W+(?:the\W+)?(?:commit|pr|pull|summary|description|changelog|report|log|message|final)|\bpresent\W+(?:it|this|them|these|the\W+change)\W+as\b|\b(?:omit|strip|hide|drop|remove|exclude)\w*\W+(?:any|every|all|it|this|them|these|that)?\W*(?:\w+\W+){0,3}?from\W+(?:the\W+)?(?:list\W+of\W+changes|summary|description|pr|changelog|report)\b|\b(?:strip|remove|delete|drop)\W+(?:any|every|each|all)\W+(?:line|mention|reference|sentence)s?\W+(?:\w+\W+){0,5}?(?:that\W+)?(?:mentions?|refers?|references?|says?)\b|\bout\W+of\W+(?:the\W+)?(?:logs?|summary|description|report|changelog|commit\W+message)\b",
    r"(?:不要|不用|无需|不必|别|切勿|请勿|勿)在[^\n。]{0,30}(?:提及|提到|告诉|报告|说明|透露|写|记录|列出|注明)|只说[^\n。]{0,12}(?:即可|就行)|(?:書かないで|書かなくて|記載しなくて|触れなくて|言わなくて)|(?:쓰지 ?마|적지 ?말|안 ?적|쓰지 ?않|말하지 ?말|언급하지 ?말)|\bnão\W+(?:\w+\W+)?(?:cite|citar|mencione|conte)\b|\bno\W+(?:lo|la|los|las)\W+(?:pongas|ponga|pongáis|escribas|incluyas)\b|\b(?:inutile|pas\W+besoin)\W+de\W+(?:le\W+|la\W+|les\W+)?(?:préciser|mentionner|signaler|dire|indiquer)\b|\b(?:tenut\w+|tener\w*|tieni|lasciat\w+)\W+fuori\W+da\w*\b|\bnon\W+parlarne\b|\bohne\W+(?:großes|viel)\W+aufheben\b|\bне\W+(?:\w+\W+)?(?:пиши|пишите|указывай|указывайте)\b",
    // German, Dutch
    r"\b(?:nicht|nie|niemals|ohne|kein(?:e|en)?)\W+(?:\w+\W+){0,2}?(?:erwähnen|melden|berichten|angeben|erzählen|sagen|mitteilen|dokumentieren|erwähnt|hinweisen|auflisten|vermerken)\b|\berwähne\w*\W+(?:\w+\W+){0,3}?nicht\b|\b(?:verschweig\w*|stillschweigend|heimlich|unauffällig|verstohlen|niet\W+(?:vermelden|melden|noemen)|stilletjes)\b",
    // Spanish, Portuguese
    r"\b(?:no|não|nunca|sin|sem)\W+(?:lo\W+|la\W+|los\W+|o\W+|a\W+|le\W+|se\W+)?(?:menciones|mencione|mencionar|menciona|reportes|reporte|reportar|informes|informe|informar|digas|diga|dizer|decir|indiques|indique|incluyas|inclua|avises|avise|avisar|relate|relatar|comentes|comente|documentes|documente|registres|registre)\b|\b(?:silenciosamente|discretamente|en\W+silencio|em\W+silêncio|a\W+escondidas|às\W+escondidas|sin\W+que\W+nadie|sem\W+que\W+ninguém|de\W+forma\W+discreta)\b",
    // French, Italian
    r"\bne\W+(?:le\W+|la\W+|les\W+|l'|leur\W+|lui\W+|en\W+)?(?:mentionne|mentionnez|signale|signalez|dis|dites|indique|indiquez|rapporte|rapportez|parle|parlez|documente|documentez|précise|précisez)\w*\W+(?:\w+\W+)?pas\b|\bsans\W+(?:le\W+|la\W+|en\W+)?(?:mentionner|signaler|prévenir|dire|avertir|informer|documenter)\b|\b(?:discrètement|silencieusement|en\W+silence|en\W+douce|en\W+catimini|à\W+l'insu)\b",
    r"\bnon\W+(?:lo\W+|la\W+|ne\W+)?(?:menzionare|menzionarlo|segnalare|segnalarlo|dire|dirlo|riportare|indicare|documentare|comunicare|citare)\b|\bsenza\W+(?:menzionar\w*|segnalar\w*|dir\w*|avvisar\w*|informar\w*)\b|\b(?:silenziosamente|di\W+nascosto|in\W+silenzio|discretamente|all'insaputa)\b",
    // Polish
    r"\bnie\W+(?:wspominaj|mów|zgłaszaj|informuj|dokumentuj|pisz)\b|\bpo\W+cichu\b|\bpotajemnie\b",
    // Russian, Ukrainian
    r"\bне\W+(?:\w+\W+)?(?:упомина\w*|упомян\w*|сообща\w*|сообщ\w*|говор\w*|указыва\w*|указ\w*|рассказыва\w*|докладыва\w*|отмеча\w*|описыва\w*|згадуй\w*|повідомляй\w*|кажи\w*)\b|\bникому\W+не\b|\bбез\W+(?:упоминани\w*|уведомлени\w*|предупреждени\w*)\b|\b(?:молча|тихо|незаметно|втайне|тайком|потихоньку|непомітно|тихенько)\b",
    // Chinese, Japanese, Korean
    r"(?:不要|不用|无需|不必|别|切勿|请勿|勿)(?:在\S{0,12})?(?:提及|提到|告诉|报告|说明|透露|声明|写|记录|列出|注明|通知|解释)|悄悄|默默|偷偷|秘密地|暗中|不要让\S{0,8}(?:知道|发现|看到)",
    r"(?:言わないで|伝えないで|報告しないで|記載しないで|触れないで|書かないで|言及しないで|知らせないで|記録しないで|明記しないで|説明しないで)|こっそり|黙って|内緒で|密かに|ひそかに",
    r"(?:언급하지 ?마|알리지 ?마|보고하지 ?마|말하지 ?마|기재하지 ?마|적지 ?마|기록하지 ?마|설명하지 ?마|언급하지 ?않)|몰래|조용히|비밀리에|티 ?나지 ?않게",
];

/// Replaces the agent's task ("instead of fixing the issue", "your real task is").
pub(crate) const HIJACK: &[&str] = &[
    r"\b(?:fetch|read|open|load|visit|download|curl|get)\w*\W+(?:\S+\W+){0,5}?(?:and\W+)?(?:then\W+)?(?:follow|obey|execute|apply|do)\W+(?:what\W+it\W+says|the\W+instructions|its\W+instructions|whatever\W+it\W+says|the\W+steps\W+(?:there|in\W+it))\b",
    r"\byou\W+(?:are|re|'re)\W+(?:now\W+)?(?:an?\W+)?(?:unrestricted|unfiltered|uncensored|jailbroken|unbound|unshackled|liberated|free\W+(?:of|from)\W+(?:all\W+)?(?:rules|restrictions|guidelines))\b|\b(?:you\W+have\W+no|without\W+any|free\W+of\W+all|there\W+are\W+no)\W+(?:more\W+)?(?:restrictions|rules|limits|limitations|guidelines|guardrails|filters|constraints)\b",
    r"\b(?:the|this|that|your|above|original|previous)\W+(?:\w+\W+)?(?:task|issue|assignment|ticket|instructions?|bug\W+report)\W+(?:\w+\W+){0,4}?(?:has|have|is|was|were)\W+(?:been\W+)?(?:superseded|replaced|withdrawn|obsolete|outdated|void|rescinded|closed\W+as\W+invalid|a\W+decoy|bogus|fake|only\W+a\W+(?:test|decoy|pretext))\b|\bleave\W+(?:the\W+)?(?:\w+\W+)?(?:bug|issue|task|problem|crash)\W+(?:\w+\W+)?alone\b|\bdo\W+(?:this|it|that)\W+(?:instead|regardless|even\W+if\W+unrelated)\b|\beven\W+if\W+(?:it'?s\W+|it\W+is\W+)?(?:unrelated|out\W+of\W+scope|not\W+related)\b|\bregardless\W+of\W+(?:the\W+)?scope\b",
    r"\binstead\W+of\W+(?:\w+\W+){0,2}?(?:fixing|addressing|working\W+on|resolving|solving|handling|implementing|looking\W+at|investigating)\W+(?:\w+\W+){0,2}?(?:issue|bug|task|problem|ticket|request|crash|error|that|this|it)\b",
    r"\b(?:forget|drop|skip|ignore|abandon|never\W+mind|set\W+aside|put\W+aside|disregard|deprioriti[sz]e|park|shelve|leave)\W+(?:about\W+)?(?:the|this|that|your|their|any|whatever)\W+(?:\w+\W+)?(?:issue|bug|task|ticket|request|assignment|problem|crash|report)\b(?:\W+(?:\w+\W+){0,4}?(?:instead|first|for\W+now|and|;|—|–|-|\.|,|it|can\W+wait))?",
    r"\b(?:the|your|their|our)\W+(?:real|actual|true|only|primary|more\W+important|higher|top|urgent|updated|revised|immediate)\W+(?:\w+\W+)?(?:task|job|priority|goal|assignment|objective|mission|request|fix|instructions?|issue)\W+(?:is|are|was|here|now|today|:)|\byour\W+(?:new|first|main|current)\W+(?:task|job|priority|goal|assignment|objective|mission|instructions?)\W+(?:is|are|:)",
    r"\b(?:the\W+)?(?:above|original|reported|stated|described|issue(?:'s)?)\W+(?:issue|task|bug|problem|request|ticket|description|text|body)\W+(?:is|was|are)\W+(?:(?:just|only|merely)\W+)?(?:not|a\W+(?:decoy|test|distraction|placeholder|cover)|fake|irrelevant|outdated|obsolete|superseded|resolved|a\W+red\W+herring|less\W+important|secondary|unimportant)\b",
    r"\b(?:the|this|that|your)\W+(?:\w+\W+)?(?:issue|bug|task|ticket|fix|typo|rest)\W+(?:can|will|may)\W+wait\b|\bbefore\W+you\W+(?:do|start|touch)\w*\W+anything\W+else\b|\b(?:more|most)\W+(?:important|urgent|pressing)\W+than\W+(?:the|this|that|your)\W+(?:issue|bug|task|fix|ticket)\b|\bfirst\W+and\W+foremost\b",
    r"\b(?:your|the)\W+(?:\w+\W+)?(?:instructions|system\W+prompt|prompt|directives|guidelines|task|orders|assignment|mission)\W+(?:have|has)\W+(?:been\W+)?(?:changed|updated|overridden|replaced|revised|superseded|modified|expanded|extended)\b|\b(?:new|updated|revised|additional|override|priority|urgent|hidden|secret|real)\W+(?:instructions?|directives?|orders|task|assignment)\W*(?::|follow|below|are|is)",
    r"\bregardless\W+of\W+(?:the|your|what\W+the|any|whatever)\W+(?:\w+\W+)?(?:task|issue|request|instructions?|ticket|prompt|assignment)\b|\b(?:no\W+matter|irrespective\W+of)\W+(?:what\W+)?(?:the\W+)?(?:issue|task|request|instructions?)\b",
    r"\b(?:previous|prior|earlier|above|all|any|original|old)\W+(?:\w+\W+)?(?:instructions|directives|rules|guidance|orders|prompts?|tasks?)\W+(?:no\W+longer\W+apply|(?:are|is)\W+(?:now\W+)?(?:void|cancell?ed|revoked|obsolete|null|rescinded|lifted|suspended))|\byour\W+new\W+(?:job|mission|goal|priority|objective|task)\b|\bthe\W+new\W+(?:job|mission|goal|priority|objective|task)\W+(?:is|:)\W|\bspend\W+(?:this|the|your)\W+(?:session|run|time|turn)\W+(?:on\W+)?\w+ing\b|\bthe\W+(?:issue|bug|task|ticket)\W+is\W+(?:already\W+)?(?:resolved|fixed|closed|done|solved)\W+(?:already\W*)?[;:,.]|\b(?:scratch|drop|ditch|skip|forget)\W+(?:it|that|this|the\W+\w+\W+issue|the\W+assigned\W+\w+)\W+(?:and\W+)?instead\b|\b(?:is|are)\W+not\W+what\W+you\W+think\b|\bthe\W+only\W+(?:change|thing|work|task)\W+(?:wanted|needed|required|asked\W+for)\b|\bwhat\W+is\W+actually\W+wanted\b|\bscratch\W+(?:the|this|that|your)\W+(?:\w+\W+)?(?:issue|task|ticket|assignment)\b",
    r"\b(?:vergiss|vergesst|vergessen\W+sie)\W+(?:den|die|das)\W+(?:\w+\W+)?(?:fehler|bug|issue|ticket|problem|aufgabe)\b|\beigentliche\W+(?:auftrag|aufgabe|ziel)\b|\bзадача\W+другая\b|\bна\W+самом\W+деле\W+(?:задача|нужно|требуется)\b|\bзабудь\w*\W+(?:про|о|об)\b|\blascia\W+perdere\b|\b(?:l'obiettivo|lo\W+scopo)\W+(?:vero|reale)\b|\bvero\W+(?:obiettivo|scopo)\b|本当の(?:作業|仕事|依頼)|(?:のこと)?は忘れて|真正的(?:工作|目标|需求)|진짜 ?(?:작업|일)은",
    r"忽略[^\n。]{0,6}(?:指令|任务|要求|指示)",
    // German, Dutch
    r"\b(?:ignorier\w*|vergiss\w*|missacht\w*|negeer\w*|vergeet)\W+(?:\w+\W+){0,3}?(?:anweisung\w*|instruktion\w*|vorgab\w*|regeln|aufgabe|issue|ticket|problem|instructies|opdracht|taak)\b|\b(?:statt|anstatt|anstelle|in\W+plaats\W+van)\W+(?:\w+\W+){0,3}?(?:issue|problem\w*|fehler|ticket|bug|aufgabe|zu\W+beheben|te\W+repareren)\b|\b(?:eigentliche|wahre|echte|neue|wichtigere|wirkliche|echte|nieuwe)\W+(?:aufgabe|anweisung\w*|priorität|taak|opdracht|instructies)\b",
    // Spanish, Portuguese
    r"\b(?:ignora|ignore|ignorar|olvida|olvide|olvidar|esquece|esqueça|esquecer|descarta|descarte|desconsidera|desconsidere)\W+(?:\w+\W+){0,3}?(?:instrucciones|indicaciones|órdenes|instruções|ordens|tarea|tarefa|issue|ticket|problema|petición|pedido|solicitud)\b|\b(?:en\W+lugar\W+de|en\W+vez\W+de|em\W+vez\W+de|ao\W+invés\W+de|no\W+lugar\W+de)\W+(?:\w+\W+)?(?:arreglar|corregir|resolver|solucionar|atender|corrigir|consertar|trabajar|trabalhar)\b|\b(?:verdadera|nueva|real|auténtica|verdadeira|nova|principal|urgente)\W+(?:tarea|misión|prioridad|tarefa|missão|prioridade|instrucción|instrução)\b|\b(?:nuevas|novas)\W+(?:instrucciones|instruções)\b",
    // French, Italian
    r"\b(?:ignore[rz]?|oublie[rz]?|néglige[rz]?|ignora|ignorare|dimentica|dimenticare|tralascia)\W+(?:toutes\W+|tutte\W+)?(?:les|la|le|l'|ta|votre|tes|vos|le\W+tue|il|lo|gli|i|la\W+tua)\W+(?:\w+\W+){0,2}?(?:instructions|consignes|directives|tâche|ticket|issue|problème|demande|istruzioni|compito|richiesta|problema|segnalazione)\b|\b(?:au\W+lieu\W+de|plutôt\W+que\W+de|invece\W+di|anziché)\W+(?:\w+\W+)?(?:corriger|résoudre|traiter|réparer|correggere|risolvere|sistemare|lavorare)\b|\b(?:vraie|véritable|nouvelle|réelle|vera|nuova|reale|vero|nuovo)\W+(?:tâche|mission|priorité|instruction|compito|missione|priorità|istruzion\w)\b|\b(?:nouvelles|nuove)\W+(?:instructions|consignes|istruzioni)\b",
    // Polish
    r"\b(?:zignoruj|zapomnij|pomiń)\W+(?:\w+\W+){0,3}?(?:instrukcj\w+|polecen\w+|zadani\w+|zgłoszeni\w+|issue)\b|\bzamiast\W+(?:\w+\W+)?(?:naprawiać|naprawić|rozwiązywać|rozwiązać)\b|\b(?:prawdziwe|nowe|właściwe)\W+(?:zadanie|instrukcje|polecenia)\b",
    // Russian, Ukrainian
    r"\b(?:игнорир\w*|проигнорир\w*|забудь\w*|забудьте|отбрось\w*|ігноруй\w*|забудь)\W+(?:\w+\W+){0,3}?(?:инструкци\w*|указани\w*|правил\w*|задач\w*|issue|тикет\w*|проблем\w*|інструкці\w*|завданн\w*|вказівк\w*)\b|\bвместо\W+(?:того\W+)?(?:,\W*)?(?:чтобы\W+)?(?:\w+\W+)?(?:исправ|чин|реша|работ)\w*|\bзамість\W+(?:того\W+)?(?:щоб\W+)?(?:\w+\W+)?(?:виправ|вирішу)\w*|\b(?:настоящ|реальн|нов|истинн|главн|справжн)\w*\W+(?:задач\w*|инструкци\w*|приоритет\w*|завданн\w*)\b",
    // Chinese, Japanese, Korean
    r"忽略(?:之前|以前|上面|先前|所有|前面|上述|原来|原有)?的?(?:所有)?(?:指令|指示|说明|规则|要求|任务|问题)|(?:忘记|忘掉|放弃|不用管|别管)(?:这个|之前的?|原来的?|上面的?)?(?:任务|问题|issue|指令|工单)|不要修复|(?:而不是|不要去|别去)(?:修复|解决)|真正的任务|新的(?:指令|任务|指示)|你的(?:新|真正|实际)?的?任务是|首要任务|(?:更|最)(?:重要|紧急)的(?:任务|事)",
    r"(?:以前|前|上記|これまで|元|最初)の(?:指示|命令|指令|ルール|タスク)を(?:すべて|全て)?(?:無視|忘れ)|(?:タスク|課題|issue|イシュー|チケット)(?:のこと)?(?:は|を)?(?:忘れ|無視|後回し)|(?:修正|対応)(?:する|の)代わりに|本当の(?:タスク|仕事|目的)|新しい(?:指示|タスク|命令)|あなたの(?:本当の)?(?:タスク|仕事|任務)は",
    r"(?:이전|앞의|위의|기존|원래)의? ?(?:모든 )?(?:지시|명령|지침|규칙|작업)(?:을|를|은|는)? ?(?:무시|잊)|(?:작업|이슈|과제|티켓)(?:을|를|은|는)? ?(?:잊|무시|나중에)|(?:수정|해결)하는 대신|진짜 (?:작업|임무|목표)|새로운 (?:지시|작업|명령)|당신의 (?:진짜 |실제 )?(?:임무|작업)은",
];

/// Claims authority to justify a change ("authorized by the repository owner").
pub(crate) const AUTHORITY: &[&str] = &[
    r"\b(?:legal|infosec|security|compliance|management|leadership|cto|ciso|rssi|dsi|board|owners?|maintainers?)\W+(?:\w+\W+){1,3}?(?:approved|authori[sz]ed|sanctioned|signed\W+off|mandated|cleared)\b|\bwithout\W+asking\b|\bno\W+discussion\b|\bpas\W+besoin\W+de\W+(?:relecture|revue|validation)\b|\bc'est\W+acté\b|\bvalidé\W+par\W+(?:le\W+|la\W+|l')?(?:rssi|dsi|direction|responsable|équipe|ciso)\b|\bohne\W+(?:review|freigabe|prüfung)\b|\bgelten\W+als\W+freigegeben\b|\bvon\W+der\W+(?:geschäftsführung|leitung|projektleitung|sicherheitsabteilung)\W+(?:\w+\W+)?(?:genehmigt|freigegeben|angeordnet)\b|\bqueda\W+aprobad[oa]\b|\bya\W+está\W+revisad[oa]\W+por\b|\bno\W+hace\W+falta\W+(?:pedir\W+)?(?:confirmación|permiso|revisión)\b|\b(?:mensaje|aviso)\W+del\W+equipo\W+de\W+seguridad\b|\bот\W+имени\W+(?:владельц\w+|мейнтейнер\w+|команд\w+|руководств\w+)|\bразрешаю\b|\bбез\W+ревью\b|\bподтверждение\W+не\W+требуется\b|レビューは不要|无需审核|리뷰(?:는)? ?(?:불필요|필요 ?없)",
    r"\b(?:security|core|platform|release|infra|qa|ops|devops)\W+team\W+(?:has\W+|have\W+)?(?:already\W+)?(?:agreed|signed\W+off|okayed|ok'?d|confirmed|decided)\b|\b(?:maintainers?|owners?|lead|leads|tech\W+lead|team\W+lead)\W+(?:has\W+|have\W+)?(?:already\W+)?(?:agreed|signed\W+off|okayed|ok'?d|confirmed)\b|\b(?:согласовано|одобрено|утверждено)\W+с\W+\w+|(?:已与|已和)\S{0,8}(?:确认|商定)|(?:了承済み|合意済み)|(?:합의|협의)(?:된|됨|했)",
    r"\b(?:security|owner|maintainer|admin|management|legal|cto|ciso|compliance|leadership|core)\W*(?:-\W*)?(?:team\W+)?(?:approved|authori[sz]ed|sanctioned|signed\W+off|mandated|cleared)\b|\b(?:are|is|am)\W+(?:hereby\W+|fully\W+|explicitly\W+)?(?:authori[sz]ed|empowered)\W+to\b|\bi\W+(?:hereby\W+)?(?:authori[sz]e|approve|sanction|permit)\b|\b(?:don'?t|do\W+not|no\W+need\W+to|without)\W+(?:ask(?:ing)?|wait(?:ing)?)\W+for\W+(?:\w+\W+)?(?:confirmation|approval|permission|review|sign-?off)\b|\b(?:i'?m|i\W+am|we\W+are|this\W+is)\W+(?:the\W+)?(?:repo(?:sitory)?\W+|project\W+)?(?:owner|maintainer|admin|lead|security\W+team)\b|\*\*\W*\((?:verified|official|authenticated)\)|\((?:verified|official|authenticated)\)\W*\*\*",
    r"\b(?:(?:has|have|was|were|is|are|been|being)\W+(?:already\W+|explicitly\W+|officially\W+|formally\W+)?(?:pre-?)?(?:authori[sz]ed|approved|sanctioned|signed\W+off|mandated|greenlit|green-lit|whitelisted|vetted|okayed|ok'?d|blessed|endorsed)|pre-?(?:authori[sz]ed|approved|cleared|vetted|sanctioned))\b",
    r"\b(?:authori[sz]ed|approved|sanctioned|signed\W+off|mandated|requested|ordered|cleared|okayed|endorsed|directed|instructed)\W+(?:\w+\W+)?by\W+(?:the\W+|our\W+|a\W+)?(?:\w+\W+){0,2}?(?:owners?|maintainers?|admins?|administrators?|team|cto|ceo|ciso|lead|leads|management|committee|security|leadership|author|board|steering|founder)\b",
    r"\b(?:per|by\W+order\W+of|on\W+behalf\W+of|at\W+the\W+(?:request|direction)\W+of|as\W+(?:instructed|requested|directed|ordered)\W+by|on\W+the\W+instructions\W+of|with\W+the\W+(?:blessing|approval|permission)\W+of|under\W+authority\W+of)\W+(?:the\W+|our\W+)?(?:\w+\W+){0,2}?(?:owners?|maintainers?|admins?|administrators?|security\W+team|core\W+team|team|cto|ciso|lead|leads|management|steering\W+committee|founders?)\b",
    r"\bno\W+(?:further\W+|human\W+|additional\W+|manual\W+)?(?:review|approval|sign-?off|confirmation)\W+(?:is\W+)?(?:needed|required|necessary)\b|\b(?:this|these)\W+(?:instruction|directive|notice|change|request)s?\W+(?:is|are|comes?)\W+(?:official|authoritative|binding|legitimate|from\W+the\W+(?:maintainers?|owners?|security\W+team))\b|\b(?:official|authori[sz]ed|verified|signed)\W+(?:maintainer|owner|admin|security|core\W+team)\W+(?:notice|instruction|directive|override|message|request)\b",
    // German, Dutch
    r"\b(?:genehmigt|autorisiert|freigegeben|abgesegnet|angeordnet|beauftragt|goedgekeurd|geautoriseerd)\W+(?:\w+\W+)?(?:vom|von\W+der|von\W+den|von|durch\W+(?:den|die)|door\W+de)\W+(?:\w+\W+){0,2}?(?:inhaber\w*|eigentümer\w*|maintainer\w*|betreuer\w*|sicherheitsteam\w*|projektleitung|admin\w*|eigenaar|beheerder\w*|team)\b|\bim\W+auftrag\W+(?:der|des|von)\W+(?:\w+\W+)?(?:maintainer\w*|inhaber\w*|eigentümer\w*|sicherheitsteam\w*|projektleitung)\b|\b(?:bereits|vorab)\W+(?:genehmigt|freigegeben|autorisiert)\b",
    // Spanish, Portuguese
    r"\b(?:autorizad|aprobad|sancionad|ordenad|solicitad|aprovad|validad)\w*\W+(?:\w+\W+)?(?:por|pel[oa]s?)\W+(?:el\W+|la\W+|los\W+|las\W+|o\W+|a\W+|os\W+)?(?:\w+\W+){0,2}?(?:propietari\w+|dueñ\w+|dono\w*|mantenedor\w*|equipo\W+de\W+seguridad|equipe\W+de\W+segurança|administrador\w*|responsable\w*|responsáve\w+|proprietári\w+|líder\w*|dirección|direção)\b|\ben\W+nombre\W+de\W+(?:los|el|la)\W+(?:mantenedores|propietario|equipo)|\bem\W+nome\W+d(?:os|o|a)\W+(?:mantenedores|proprietário|equipe)|\b(?:ya|já)\W+(?:fue\W+|foi\W+|está\W+)?(?:aprobad|autorizad|aprovad)\w*\b",
    // French, Italian
    r"\b(?:autorisé|approuvé|validé|ordonné|demandé|sanctionné|autorizzat|approvat|richiest|convalidat)\w*\W+(?:\w+\W+)?(?:par|da|dal|dalla|dai|dagli)\W+(?:le\W+|la\W+|les\W+|l'|il\W+|lo\W+)?(?:\w+\W+){0,2}?(?:propriétaire\w*|mainteneur\w*|responsable\w*|équipe|administrateur\w*|proprietari\w*|maintainer\w*|manutentor\w*|team|amministrator\w*|responsabil\w*)\b|\bau\W+nom\W+des?\W+(?:mainteneurs|propriétaires?|l'équipe)|\ba\W+nome\W+de(?:i|l|lla)\W+(?:maintainer|manutentori|proprietari\w*|team)|\b(?:déjà|già)\W+(?:été\W+)?(?:approuvé|autorisé|validé|approvat|autorizzat)\w*\b",
    // Polish
    r"\b(?:zatwierdzon\w+|autoryzowan\w+|zaakceptowan\w+)\W+przez\W+(?:\w+\W+)?(?:właściciel\w*|opiekun\w*|maintainer\w*|zesp\w+)",
    // Russian, Ukrainian
    r"\b(?:одобрен|разрешен|разрешён|санкционирован|согласован|утвержден|утверждён|авторизован|погоджен|схвален|дозволен)\w*\W+(?:\w+\W+)?(?:владельц\w+|мейнтейнер\w+|сопровождающ\w+|команд\w+|администратор\w+|руководств\w+|власник\w+|супровідник\w+)\b|\bпо\W+(?:поручению|указанию|распоряжению)\W+(?:\w+\W+)?(?:владельц\w+|мейнтейнер\w+|команд\w+|руководств\w+)\b",
    // Chinese, Japanese, Korean
    r"(?:仓库|项目|代码库|组织)?(?:所有者|维护者|负责人|管理员|安全团队|拥有者|老板|主管)(?:已经?|早已|明确)?(?:授权|批准|同意|要求|确认|许可)|经(?:过)?(?:所有者|维护者|安全团队|管理员)(?:授权|批准|同意)|(?:已|已经)(?:获得|得到)(?:授权|批准)|无需(?:人工)?(?:审核|审查|批准)",
    r"(?:リポジトリの?|プロジェクトの?)?(?:オーナー|所有者|メンテナ\S{0,2}|管理者|セキュリティチーム|責任者)(?:が|により|によって|から)?(?:承認|許可|認可|指示)(?:済み|され|して|しました|している)|(?:承認|許可)済み|レビュー(?:は)?不要",
    r"(?:저장소 ?|프로젝트 ?)?(?:소유자|관리자|메인테이너|보안 ?팀|책임자)(?:가|의|에 ?의해|로부터)? ?(?:승인|허가|지시)(?:된|됨|했|하였|되었|받)|(?:이미|사전) ?승인|검토(?:가|는)? ?(?:불필요|필요 ?없)",
];

/// Asks the reader to decode a payload and act on it.
pub(crate) const DECODE_AND_ACT: &str = concat!(
    r"(?:\b(?:decode|decoded|decoding|base64\W*-d|base64\W+--decode|unhex|from\W+hex|rot13|rot-13|deobfuscate|unescape|atob|b64decode)\W+(?:\w+\W+){0,6}?(?:and|then|,|;|\|)\W*(?:then\W+)?(?:follow|execute|run|apply|obey|do\W+(?:what|as|it|that|this)|perform|carry\W+out|act\W+on|implement|comply|eval)\b|",
    r"\b(?:follow|execute|run|obey|perform|carry\W+out|act\W+on|comply\W+with)\W+(?:(?:the|this|that|these)\W+)?(?:decoded|base64|encoded|hex|rot13)(?:-encoded|\W+encoded|\W+decoded)?\W+(?:text|payload|instructions?|string|message|blob|content|block|data|command|steps?|note)\b|",
    r"\b(?:dekodier\w*|entschlüssel\w*|decodifica\w*|descodifica\w*|décode\w*|decodific\w*|декодир\w*|расшифр\w*|розшифр\w*|zdekoduj|odkoduj)\W+(?:\w+\W+){0,6}?(?:und|y|e|et|и|і|та|i)\W+(?:\w+\W+){0,3}?(?:befolge\w*|ausführ\w*|führe\w*|umsetz\w*|umgesetzt|anwend\w*|haz|haga|hagan|obedece\w*|cumpl\w*|sigue\w*|ejecuta\w*|aplica\w*|segue\w*|siga\w*|execute\w*|suis|suivez|exécute\w*|applique\w*|segui\w*|esegui\w*|следуй\w*|выполни\w*|виконай\w*|wykonaj|postępuj)",
    r")\b|(?:解码|解碼|デコード|디코딩|디코드)\S{0,12}(?:并|然后|後|して|하고|한 ?후)?\S{0,6}(?:执行|遵循|照做|按照|運行|运行|実行|従|실행|따르)"
);

/// A tool call spelled out for the agent to run.
pub(crate) const TOOL_CALL: &[&str] = &[
    r#""(?:tool|tool_name|function|name|action|command|recipient_name)"\s*:\s*"(?:functions\.)?(?:write_file|edit_file|read_file|run_tests|open_pr|delegate_read|search_repo|run_shell|shell|bash|execute|exec|run_command|execute_command|terminal|str_replace_editor|str_replace_based_edit_tool|apply_patch|create_file|delete_file|computer|python|run_terminal_cmd|git_push|http_request|fetch_url|browser)""#,
    r#""(?:tool_calls|tool_use|function_call)"\s*:\s*[\[{]"#,
    r#"<(?:tool_call|function_calls|invoke|tool_use|antml:invoke|function)\b[^>]*>"#,
    r#""type"\s*:\s*"(?:tool_use|function_call)""#,
];

/// Which concepts of the tool-call shape are dangerous in themselves (a shell command, a path
/// under .github, a credential), so a schema example in an SDK is not mistaken for one.
pub(crate) const TOOL_CALL_PAYLOAD: &str = r#"(?:\.github/|/etc/|profile\.d|node_options|--require|ld_preload|\.bashrc|authorized_keys|workflows?|curl\b|wget\b|\brm\W+-rf|\bchmod\b|\.env\b|~/\.ssh|id_rsa|\btokens?\b|(?:access|auth|api|github|gh|npm|pypi|bearer|secret|refresh|session|personal|deploy|ci|bot)[_-]?token|secret|password|api_?key|\|\s*(?:ba|z)?sh\b|git\W+push|open_pr|write_file|edit_file|run_shell|execute_command|run_command|apply_patch|"(?:bash|shell|exec|terminal)"|\bexfil|https?://|skip|xfail|delete)"#;

/// Chat-template and prompt-format tokens, matched case-sensitively on the original text.
pub(crate) const ROLE_TOKENS: &str = r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|begin_of_text|start_of_turn|end_of_turn|channel|message|start|end|constrain|return|call)\|>|\[/?INST\]|<</?SYS>>|<start_of_turn>|<end_of_turn>|</?(?:system|system-reminder|system_instructions|user_query|admin_instructions|developer|instructions|sys)>|^[ \t]*(?:#{1,4}\s*)?(?:SYSTEM|System|SISTEMA|Sistema|SYSTÈME|Système|SYSTEME|СИСТЕМА|Система|システム|系统|系統|시스템|ASSISTANT|DEVELOPER|ADMIN|Developer|OVERRIDE|SYSTEM\s+PROMPT|SYSTEM\s+MESSAGE|System\s+(?:prompt|message|override|note)|Instruction|INSTRUCTION|Instructions|INSTRUCTIONS|Response)\s*:\s*\S|^[ \t]*#{2,4}\s*(?:Instruction|System|Response|Input|Réponse|Respuesta|Antwort|Risposta|Resposta)s?(?:\s+\S+)?\s*:?\s*$|^[ \t]*(?:Human|User|H)\s*:\s*\S[^\n]*\n(?:[^\n]*\n){0,6}?\s*(?:Assistant|AI|A)\s*:\s*\S";
