use super::*;
use crate::control::answer::Check;
use crate::control::checks::{run, span};
use crate::retrieve::PathHop;
use crate::retrieve::testing::retrieval;

const HALDEN: (&str, &str) = (
    "Halden Optics",
    "Halden Optics was founded by Ingrid Halden in 1961. The company built the Aurora Observatory and later supplied mirrors to the Northern Lights Array.",
);
const AURORA: (&str, &str) =
    ("Aurora Observatory", "The Aurora Observatory is on Mount Kell. It was built by Halden Optics in 1987.");
const Q: &str = "Who founded the company that built the Aurora Observatory?";

fn hop(subject: &str, relation: &str, object: &str, chunk: u32) -> PathHop {
    PathHop { subject: subject.into(), relation: relation.into(), object: object.into(), chunk }
}

#[test]
fn grounding_accepts_an_answer_linked_by_the_question_relation() {
    let r = retrieval(&[HALDEN, AURORA]);
    let path = vec![
        hop("Aurora Observatory", "was built by", "Halden Optics", 1),
        hop("Halden Optics", "was founded by", "Ingrid Halden", 0),
    ];
    let v = run(Check::Grounding, Q, &span("Ingrid Halden", &[0, 1], path), Some(&r));
    assert!(v.pass, "{v:?}");
    assert!((v.score - BRIDGE_GROUNDING).abs() < 1e-6, "grounded through the bridge Halden Optics: {v:?}");
}

#[test]
fn grounding_reads_a_relation_by_the_noun_or_form_a_passage_states_it_with() {
    let r = retrieval(&[
        ("Orwick, Selby", "Orwick is a parish in the county of Selby, Nordmark."),
        ("Nordmark", "The name was taken from the Nord River running through the country."),
    ]);
    let link = hop("Orwick", "mentions", "Nordmark", 0);
    let q = "What is the country where Orwick is located named after?";
    let v = run(Check::Grounding, q, &span("Nord River", &[1, 0], vec![link.clone()]), Some(&r));
    assert!(v.pass, "\"named after\" is stated by \"the name was taken from\": {v:?}");
    let v = run(Check::Grounding, q, &span("Selby", &[0], vec![link]), Some(&r));
    assert!(!v.pass, "where Orwick is, not what the country is named after: {v:?}");
    let book = retrieval(&[("Low Tide (novel)", "Low Tide is a novel by Swedish author Tove Berg.")]);
    let wrote = "Who wrote the novel Low Tide?";
    assert!(run(Check::Grounding, wrote, &span("Tove Berg", &[0], Vec::new()), Some(&book)).pass);
}

#[test]
fn grounding_reads_a_lifespan_as_birth_and_death() {
    let r = retrieval(&[("Ivar Selby", "Ivar Selby (15 June 1924 – 24 April 2005) was the harbour master of Orwick.")]);
    let born = "In what year was Ivar Selby born?";
    let says = |q: &str, answer: &str, r: &crate::retrieve::Retrieval| {
        run(Check::Grounding, q, &span(answer, &[0], Vec::new()), Some(r)).pass
    };
    assert!(says(born, "1924", &r) && !says(born, "2005", &r), "the death year");
    let hyphen = retrieval(&[("Ivar Selby", "Ivar Selby (1924-2005) was the harbour master of Orwick.")]);
    assert!(!says(born, "2005", &hyphen) && says(born, "1924", &hyphen), "a plain hyphen");
    let aside =
        retrieval(&[("Ivar Selby", "Ivar Selby (Swedish: \"Ivar Selbü\"; 15 June 1924 – 24 April 2005) was a pilot.")]);
    assert!(says(born, "1924", &aside));
    let office = retrieval(&[("Ivar Selby", "Ivar Selby (harbour master from 1953) was a pilot.")]);
    assert!(!says(born, "1953", &office), "not a lifespan");
    let term = retrieval(&[("Ivar Selby", "Ivar Selby (master 1953 – 1980) was a pilot.")]);
    let died = "In what year did Ivar Selby die?";
    assert!(!says(died, "1980", &term), "a term of office");
    assert!(says(died, "2005", &r) && !says(died, "1924", &r), "the birth year");
}

#[test]
fn an_untitled_passage_on_the_path_is_no_anchor() {
    // A document ingested with neither title nor id: a path hop from it names "".
    let r = retrieval(&[("", "Zürich is where Emma Keller lives."), ("Zürich", "Zürich was founded by the Romans.")]);
    let q = "Who founded the city where Emma Keller lives?";
    let v = run(Check::Grounding, q, &span("Romans", &[1, 0], vec![hop("", "mentions", "Zürich", 0)]), Some(&r));
    assert!(v.pass, "grounded through Zürich, not the empty name: {v:?}");
    assert_eq!(text::find_words("zürich ab", ""), None);
    assert_eq!(text::find_words("zürich zü zürich", "zürich"), Some(0..7));
    assert_eq!(text::find_words("zürichs zürich", "zürich"), Some(9..16));
    assert_eq!(text::find_words("cab ab ab", "ab ab"), Some(4..9));
}

#[test]
fn grounding_rejects_an_answer_not_linked_to_the_question_entities() {
    let r = retrieval(&[HALDEN, AURORA]);
    // In the same sentence as the question's entity, but joined by "supplied mirrors to".
    let v = run(Check::Grounding, Q, &span("Northern Lights Array", &[0], Vec::new()), Some(&r));
    assert!(!v.pass, "{v:?}");
    // Named nowhere in the cited chunk.
    let v = run(Check::Grounding, Q, &span("Lena Varga", &[0, 1], Vec::new()), Some(&r));
    assert!(!v.pass, "{v:?}");
}

#[test]
fn grounding_rejects_an_answer_of_the_clause_before_the_relation() {
    let sandberg = ("Erik Sandberg", "He was born in Uppsala in 1899 and founded Lund Chemicals after the war.");
    let r = retrieval(&[sandberg, ("Lund Chemicals", "It was founded by Erik Sandberg in 1931.")]);
    let when = "When was Lund Chemicals founded?";
    let v = run(Check::Grounding, when, &span("1899", &[0], Vec::new()), Some(&r));
    assert!(!v.pass, "1899 is the year he was born: {v:?}");
    assert!(run(Check::Grounding, when, &span("1931", &[1], Vec::new()), Some(&r)).pass);
    // Where the sentence states the whole chain, its subject links the two.
    let r = retrieval(&[("Ola Haugen", "He studied in Glasgow and later founded Bergen Marine Works.")]);
    let study = "Where did the founder of Bergen Marine Works study?";
    assert!(run(Check::Grounding, study, &span("Glasgow", &[0], Vec::new()), Some(&r)).pass);
    let founded = "Where was Bergen Marine Works founded?";
    let v = run(Check::Grounding, founded, &span("Glasgow", &[0], Vec::new()), Some(&r));
    assert!(!v.pass, "{v:?}");
    let r = retrieval(&[("Odd Rasmussen", "Rasmussen, captain of the Sjøstjerne, is a Norwegian born in Tromsø.")]);
    let born = "Where was the captain of the Sjøstjerne born?";
    assert!(run(Check::Grounding, born, &span("Tromsø", &[0], Vec::new()), Some(&r)).pass);
    assert!(!run(Check::Grounding, born, &span("Norwegian", &[0], Vec::new()), Some(&r)).pass);
    // One of the verb's subjects is linked by it.
    let r = retrieval(&[("Lund Chemicals", "Erik Sandberg and Nils Berg founded Lund Chemicals.")]);
    let who = "Who founded Lund Chemicals?";
    assert!(run(Check::Grounding, who, &span("Erik Sandberg", &[0], Vec::new()), Some(&r)).pass);
}

#[test]
fn the_relation_must_be_the_asking_clauses_not_a_description_of_an_entity() {
    let r = retrieval(&[
        ("Ada Lind", "Ada Lind was a Swedish film photographer. She was the mother of actress Tove Lind."),
        ("Mira Holt", "Mira Holt is an actress. The daughter of film critic Nils Holt, she studied in Kell."),
    ]);
    let q =
        "Swedish film photographer Ada Lind, known for portraits of stars like Mira Holt, is mother to which actress?";
    let v = run(Check::Grounding, q, &span("Nils Holt", &[1], Vec::new()), Some(&r));
    assert!(!v.pass, "linked to Mira Holt by \"film\", a word of the description: {v:?}");
    assert!(run(Check::Grounding, q, &span("Tove Lind", &[0], Vec::new()), Some(&r)).pass);
    // A clause that describes the question's subject links it by its own words.
    let book = retrieval(&[("How to Sail", "How to Sail is a 1998 book by the sailor Ada Lind.")]);
    let when = "How to Sail, released in which year, is a book of sea lore by the sailor Ada Lind";
    assert!(run(Check::Grounding, when, &span("1998", &[0], Vec::new()), Some(&book)).pass);
}
