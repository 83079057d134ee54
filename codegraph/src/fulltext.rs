//! BM25 over one commit's files with tantivy: the lexical and structural channels.
//!
//! Each snapshot builds one in-memory tantivy index with a field per channel, from the
//! term-frequency lists the code-aware tokenizer ([`crate::tokenize`]) left in the blob
//! records. Tantivy receives those lists through [`TermFrequencyTokenizer`], which emits each
//! stored term as many times as it occurred, so the indexed terms, term frequencies and field
//! lengths are exactly the tokenizer's; tantivy owns the postings, the field norms, the
//! statistics and the Okapi BM25 scoring (k1 = 1.2, b = 0.75, Lucene's non-negative idf).
//!
//! Documents are added in path order by one single-threaded writer into one segment, so a
//! document's id is its position in the snapshot and ties broken by id are ties broken by path.
//! The statistics are those of exactly one commit's searchable files.
//!
//! A built index can be saved as one *bundle* (the segment files tantivy wrote, concatenated
//! behind a small header) and opened again without rebuilding: the engine keeps one bundle per
//! commit next to the blob records, named after a digest of the exact documents that went in,
//! so a bundle is only ever used for the documents it was built from.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::directory::{Directory, RamDirectory};
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{Token, TokenStream, Tokenizer, TokenizerManager};
use tantivy::{
    DocId, Index, ReloadPolicy, Score, Searcher, SegmentOrdinal, SegmentReader, TantivyDocument,
    Term,
};

/// Name under which [`TermFrequencyTokenizer`] is registered.
const TF_TOKENIZER: &str = "codegraph_tf";
/// Memory budget of the single-segment writer: it only sizes the initial term table (that
/// writer never flushes, so the index stays one segment however large the commit).
const WRITER_MEMORY: usize = 64 << 20;

/// A channel of the full-text index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// File text and path.
    Lexical,
    /// Signatures, docstrings, imports, called names (and path, for files with structure).
    Structural,
}

/// A document's terms for one channel: `(term, frequency)` pairs. A term may appear in
/// several pairs (text and path); tantivy adds their frequencies into one posting.
pub type TermCounts<'a> = Vec<(&'a str, u32)>;

/// Encode term counts as the text [`TermFrequencyTokenizer`] reads: `term\tcount\n` lines.
/// Terms never hold whitespace (the tokenizer keeps letters, digits and `_` only).
fn encode(terms: &[(&str, u32)], out: &mut String) {
    out.clear();
    for &(term, count) in terms {
        if count > 0 && !term.is_empty() && !term.contains(char::is_whitespace) {
            let _ = writeln!(out, "{term}\t{count}");
        }
    }
}

/// A tantivy tokenizer over pre-counted terms: reads `term\tcount` lines and emits `term`
/// `count` times. This is how the code-aware tokenizer's output, kept per blob as term
/// frequencies, reaches tantivy without re-reading or re-tokenizing any file.
#[derive(Debug, Clone, Default)]
pub struct TermFrequencyTokenizer;

/// The token stream of [`TermFrequencyTokenizer`].
pub struct TermFrequencyStream<'a> {
    lines: std::str::Lines<'a>,
    remaining: u32,
    token: Token,
}

impl Tokenizer for TermFrequencyTokenizer {
    type TokenStream<'a> = TermFrequencyStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> TermFrequencyStream<'a> {
        TermFrequencyStream {
            lines: text.lines(),
            remaining: 0,
            token: Token::default(),
        }
    }
}

impl TokenStream for TermFrequencyStream<'_> {
    fn advance(&mut self) -> bool {
        while self.remaining == 0 {
            let Some(line) = self.lines.next() else {
                return false;
            };
            let Some((term, count)) = line.split_once('\t') else {
                continue;
            };
            let Ok(count) = count.parse::<u32>() else {
                continue;
            };
            if count == 0 || term.is_empty() {
                continue;
            }
            self.token.text.clear();
            self.token.text.push_str(term);
            self.token.offset_from = 0;
            self.token.offset_to = term.len();
            self.remaining = count;
        }
        self.remaining -= 1;
        self.token.position = self.token.position.wrapping_add(1);
        true
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

/// The full-text index of one snapshot.
pub struct FullText {
    index: Index,
    /// The directory the index lives in, read raw (with tantivy's footers) for a bundle.
    files: RamDirectory,
    searcher: Searcher,
    lexical: Field,
    structural: Field,
    num_docs: u32,
}

impl std::fmt::Debug for FullText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullText")
            .field("num_docs", &self.num_docs)
            .finish_non_exhaustive()
    }
}

/// A tantivy failure. Building and searching an in-memory index only fails on a bug or when
/// memory runs out, so callers treat it as fatal.
pub type TantivyResult<T> = std::result::Result<T, tantivy::TantivyError>;

/// The documents of an index as tantivy receives them: per document, the encoded lexical and
/// structural term counts, plus a digest of all of them (and of the bundle format), which names
/// the saved bundle of exactly these documents.
#[derive(Debug, Clone, Default)]
pub struct EncodedDocs {
    docs: Vec<(String, String)>,
    digest: String,
}

impl EncodedDocs {
    /// Encode one `(lexical, structural)` pair of term counts per document, in document order.
    pub fn new<'a, I>(docs: I) -> EncodedDocs
    where
        I: IntoIterator<Item = (TermCounts<'a>, TermCounts<'a>)>,
    {
        let mut hasher = Sha256::new();
        hasher.update(BUNDLE_MAGIC);
        let mut encoded = Vec::new();
        for (lexical, structural) in docs {
            let (mut lex, mut structure) = (String::new(), String::new());
            encode(&lexical, &mut lex);
            encode(&structural, &mut structure);
            for text in [&lex, &structure] {
                hasher.update((text.len() as u64).to_le_bytes());
                hasher.update(text.as_bytes());
            }
            encoded.push((lex, structure));
        }
        hasher.update((encoded.len() as u64).to_le_bytes());
        EncodedDocs {
            docs: encoded,
            digest: hex::encode(hasher.finalize()),
        }
    }

    /// Hex SHA-256 of the documents and the bundle format.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether there are no documents.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

/// First bytes of a saved bundle; changes whenever the schema or the bundle layout does.
const BUNDLE_MAGIC: &[u8] = b"airlock-codegraph-fulltext/1\n";

fn bundle_error(detail: impl Into<String>) -> tantivy::TantivyError {
    tantivy::TantivyError::InternalError(format!("codegraph full-text bundle: {}", detail.into()))
}

fn schema() -> (Schema, Field, Field) {
    let indexing = TextFieldIndexing::default()
        .set_tokenizer(TF_TOKENIZER)
        .set_index_option(IndexRecordOption::WithFreqs)
        .set_fieldnorms(true);
    let options = TextOptions::default().set_indexing_options(indexing);
    let mut schema = Schema::builder();
    let lexical = schema.add_text_field("lexical", options.clone());
    let structural = schema.add_text_field("structural", options);
    (schema.build(), lexical, structural)
}

fn tokenizers() -> TokenizerManager {
    let tokenizers = TokenizerManager::new();
    tokenizers.register(TF_TOKENIZER, TermFrequencyTokenizer);
    tokenizers
}

/// The first `n` bytes of `rest`, which moves past them.
fn take<'a>(rest: &mut &'a [u8], n: usize) -> TantivyResult<&'a [u8]> {
    if rest.len() < n {
        return Err(bundle_error("truncated"));
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

/// The next `N` bytes of `rest` as an array.
fn take_array<const N: usize>(rest: &mut &[u8]) -> TantivyResult<[u8; N]> {
    <[u8; N]>::try_from(take(rest, N)?).map_err(|_| bundle_error("truncated"))
}

impl FullText {
    /// Build the index from one `(lexical, structural)` pair of term counts per document,
    /// in document order.
    pub fn build<'a, I>(docs: I) -> TantivyResult<FullText>
    where
        I: IntoIterator<Item = (TermCounts<'a>, TermCounts<'a>)>,
    {
        FullText::build_encoded(&EncodedDocs::new(docs))
    }

    /// Build the index from encoded documents.
    pub fn build_encoded(docs: &EncodedDocs) -> TantivyResult<FullText> {
        let (schema, lexical, structural) = schema();
        let files = RamDirectory::create();
        let mut writer = Index::builder()
            .schema(schema)
            .tokenizers(tokenizers())
            .single_segment_index_writer::<TantivyDocument>(files.clone(), WRITER_MEMORY)?;
        for (lex, structure) in &docs.docs {
            let mut doc = TantivyDocument::new();
            for (field, text) in [(lexical, lex), (structural, structure)] {
                if !text.is_empty() {
                    doc.add_text(field, text);
                }
            }
            writer.add_document(doc)?;
        }
        let index = writer.finalize()?;
        FullText::open(index, files)
    }

    fn open(mut index: Index, files: RamDirectory) -> TantivyResult<FullText> {
        index.set_tokenizers(tokenizers());
        let field = |name: &str| {
            index
                .schema()
                .get_field(name)
                .map_err(|_| bundle_error(format!("no field {name:?} in the schema")))
        };
        let (lexical, structural) = (field("lexical")?, field("structural")?);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let searcher = reader.searcher();
        let segments = searcher.segment_readers().len();
        if segments > 1 {
            return Err(tantivy::TantivyError::InternalError(format!(
                "the codegraph full-text index must have one segment, not {segments}"
            )));
        }
        let num_docs = u32::try_from(searcher.num_docs())
            .map_err(|_| bundle_error("more than 2^32 documents"))?;
        Ok(FullText {
            index,
            files,
            searcher,
            lexical,
            structural,
            num_docs,
        })
    }

    /// The index as one byte string: [`BUNDLE_MAGIC`], then per file its name and bytes, each
    /// behind its length (u32 and u64, little-endian), files sorted by name.
    pub fn to_bundle(&self) -> TantivyResult<Vec<u8>> {
        let mut names: Vec<PathBuf> = self
            .index
            .directory()
            .list_managed_files()
            .into_iter()
            .collect();
        for fixed in ["meta.json", ".managed.json"] {
            let path = PathBuf::from(fixed);
            if !names.contains(&path) && self.files.exists(&path)? {
                names.push(path);
            }
        }
        names.sort();
        let mut out = BUNDLE_MAGIC.to_vec();
        for name in names {
            let bytes = self
                .files
                .open_read(&name)
                .map_err(|e| bundle_error(format!("read {}: {e}", name.display())))?
                .read_bytes()?;
            let name = name
                .to_str()
                .ok_or_else(|| bundle_error("a file name that is not UTF-8"))?;
            out.extend_from_slice(&(name.len() as u32).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(bytes.as_slice());
        }
        Ok(out)
    }

    /// Open an index saved by [`FullText::to_bundle`]. A truncated or foreign byte string is an
    /// error, never a panic.
    pub fn from_bundle(bundle: &[u8]) -> TantivyResult<FullText> {
        let mut rest = bundle
            .strip_prefix(BUNDLE_MAGIC)
            .ok_or_else(|| bundle_error("not a bundle of this version"))?;
        if rest.is_empty() {
            return Err(bundle_error("no files"));
        }
        let files = RamDirectory::create();
        while !rest.is_empty() {
            let name_len = u32::from_le_bytes(take_array(&mut rest)?);
            let name = std::str::from_utf8(take(&mut rest, name_len as usize)?)
                .map_err(|_| bundle_error("a file name that is not UTF-8"))?;
            if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
                return Err(bundle_error(format!("a file name with a path: {name:?}")));
            }
            let len = u64::from_le_bytes(take_array(&mut rest)?);
            let len = usize::try_from(len).map_err(|_| bundle_error("a file too large"))?;
            files.atomic_write(Path::new(name), take(&mut rest, len)?)?;
        }
        FullText::open(Index::open(files.clone())?, files)
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.num_docs as usize
    }

    /// Whether there are no documents.
    pub fn is_empty(&self) -> bool {
        self.num_docs == 0
    }

    fn field(&self, channel: Channel) -> Field {
        match channel {
            Channel::Lexical => self.lexical,
            Channel::Structural => self.structural,
        }
    }

    /// Inverse document frequency of a term in a channel, as tantivy's BM25 computes it
    /// (`ln(1 + (N - df + 0.5) / (df + 0.5))`); 0 if the term occurs nowhere.
    pub fn idf(&self, channel: Channel, term: &str) -> f64 {
        let term = Term::from_field_text(self.field(channel), term);
        let df = self.searcher.doc_freq(&term).unwrap_or(0);
        if df == 0 {
            return 0.0;
        }
        let n = f64::from(self.num_docs);
        let df = df as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Score every document of a channel matching at least one query term. `query` holds
    /// distinct `(term, weight)` pairs; a term's BM25 contribution is multiplied by its weight
    /// (a tantivy boost). Result: best first, ties by document id.
    pub fn search(
        &self,
        channel: Channel,
        query: &[(String, f64)],
    ) -> TantivyResult<Vec<(u32, f64)>> {
        let field = self.field(channel);
        let clauses: Vec<(Occur, Box<dyn Query>)> = query
            .iter()
            .filter(|(term, weight)| !term.is_empty() && *weight > 0.0)
            .map(|(term, weight)| {
                let term = TermQuery::new(
                    Term::from_field_text(field, term),
                    IndexRecordOption::WithFreqs,
                );
                let query: Box<dyn Query> = if *weight == 1.0 {
                    Box::new(term)
                } else {
                    Box::new(BoostQuery::new(Box::new(term), *weight as Score))
                };
                (Occur::Should, query)
            })
            .collect();
        if clauses.is_empty() {
            return Ok(Vec::new());
        }
        let mut ranked = self
            .searcher
            .search(&BooleanQuery::new(clauses), &AllMatches)?;
        ranked.retain(|(_, score)| *score > 0.0);
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(ranked)
    }
}

/// Collects every matching document with its score (the index has one segment, so a
/// segment-local id is the document id).
struct AllMatches;

impl Collector for AllMatches {
    type Fruit = Vec<(u32, f64)>;
    type Child = AllMatchesSegment;

    fn for_segment(
        &self,
        _segment_local_id: SegmentOrdinal,
        _segment: &SegmentReader,
    ) -> tantivy::Result<AllMatchesSegment> {
        Ok(AllMatchesSegment(Vec::new()))
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Vec<(u32, f64)>>) -> tantivy::Result<Vec<(u32, f64)>> {
        Ok(fruits.into_iter().flatten().collect())
    }
}

struct AllMatchesSegment(Vec<(u32, f64)>);

impl SegmentCollector for AllMatchesSegment {
    type Fruit = Vec<(u32, f64)>;

    fn collect(&mut self, doc: DocId, score: Score) {
        self.0.push((doc, f64::from(score)));
    }

    fn harvest(self) -> Vec<(u32, f64)> {
        self.0
    }
}
