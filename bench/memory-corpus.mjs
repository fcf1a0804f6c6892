// The labelled corpus of bench/memory.mjs: five fictional users (each its own agent), their facts
// (as long-term memories: "The user …" sentences, one topic tag, a confidence score), later
// corrections of some facts, and queries with the ids of their relevant facts. Deterministic,
// written here; no external data.
//
// Every fact comes from a template filled with each user's values ({0}, {1}, … in the text and
// the queries); a template may carry a correction ({c0}, … its own values), stored after all
// facts, sometimes with a lower or equal score than the fact it corrects.
//
// Query kinds:
//   exact       words of the fact
//   forms       other forms of the fact's words (plurals, -ing, -ed, irregular forms), none of
//               the fact's own words
//   partial     prefixes of the fact's distinctive words, as typed ({0:p}: the longest word of a
//               value cut to ~60%)
//   paraphrase  no content word (nor a form of one) in common with the fact, its tags included
//   current     "what is true now" after a correction: relevant = the correction only; the
//               corrected fact is the query's `outdated`; `relation`: the correction's score
//               is lower than, equal to or higher than the fact's
// checkCorpus() verifies the lexical constraints (run by bench/memory.mjs, warnings on stderr).

const USERS = ["maya", "tomas", "priya", "kenji", "olu"];

// [key, tag, score, text, values per user, queries, correction?]
// queries: [kind, text, {withCorrection?: true}]; correction: {tag?, score, text, values, current: [query texts]}
const T = [
  ["job", "work", 0.95, "The user works as a {0} at {1}.",
    [["pediatric nurse", "Brightwater Children's Hospital"], ["carpenter", "Oakridge Joinery"], ["data engineer", "Lumenfield Analytics"],
      ["pastry chef", "Hanamori Patisserie"], ["chemistry teacher", "Greenhill Secondary School"]],
    [["exact", "{0}"], ["partial", "{1:p}"], ["paraphrase", "What does the user do for a living?"]],
    { score: 0.85, text: "The user switched employers and joined {c0} in {c1}.",
      values: [["Northgate Medical Center", "January"], ["Sierra Timberworks", "May"], ["Quillstream Labs", "August"], ["Kitsune Bakery", "October"], ["Riverside Academy", "September"]],
      current: ["Which company does the user work for now?"] }],
  ["manager", "work", 0.7, "The user's manager is named {0}.",
    [["Denise Carter"], ["Joaquin Mora"], ["Harold Benson"], ["Akiko Sato"], ["Funmi Bello"]],
    [["exact", "{0}"], ["paraphrase", "Who is the user's boss?"]]],
  ["commute", "work", 0.8, "The user commutes by {0} and the trip takes about {1} minutes.",
    [["tram", "25"], ["bicycle", "15"], ["train", "40"], ["subway", "30"], ["bus", "45"]],
    [["exact", "commute {0}"], ["forms", "commuting trips"], ["paraphrase", "How does the user get to the office?"]]],
  ["meeting", "schedule", 0.75, "The user has a team meeting every {0} at {1}.",
    [["Monday", "9 am"], ["Tuesday", "8 am"], ["Wednesday", "10 am"], ["Thursday", "11 am"], ["Friday", "2 pm"]],
    [["exact", "team meeting"], ["forms", "meetings on {0}s"], ["paraphrase", "When is the weekly sync with colleagues?"]]],
  ["certification", "career", 0.8, "The user is studying for a {0} certification.",
    [["wound care"], ["furniture restoration"], ["cloud architecture"], ["sommelier"], ["school leadership"]],
    [["forms", "study certificate"], ["paraphrase", "Which exam is the user preparing to pass?"]]],
  ["laptop", "tech", 0.7, "The user's work laptop is a {0} running {1}.",
    [["ThinkPad", "Windows"], ["MacBook Air", "macOS"], ["Framework", "Fedora Linux"], ["MacBook Pro", "macOS"], ["Dell XPS", "Ubuntu"]],
    [["exact", "laptop"], ["partial", "{0:p}"], ["paraphrase", "Which computer does the user use for the job?"]]],
  ["notes", "tools", 0.65, "The user writes notes in {0} and keeps tasks in {1}.",
    [["Notion", "Todoist"], ["a paper notebook", "a whiteboard"], ["Obsidian", "Jira"], ["a recipe binder", "Trello"], ["OneNote", "Google Tasks"]],
    [["exact", "{1}"], ["paraphrase", "Which apps help the user stay organized?"]]],
  ["remote", "work", 0.7, "The user works from home on {0}.",
    [["Fridays"], ["Mondays"], ["Wednesdays"], ["Tuesdays"], ["Thursdays"]],
    [["forms", "working remotely"], ["paraphrase", "Which weekday is the user away from the office?"]],
    { score: 0.6, text: "The user now goes to the office every day.", values: [[], [], [], [], []],
      current: ["Does the user still work from home?"] }],

  ["city", "home", 0.9, "The user lives in {0}.",
    [["Paris"], ["Valencia"], ["Toronto"], ["Osaka"], ["Lagos"]],
    [["exact", "{0}"]],
    { score: 0.8, text: "The user moved to {c0} in {c1}.",
      values: [["Berlin", "March"], ["Lisbon", "June"], ["Vancouver", "April"], ["Kyoto", "November"], ["Accra", "February"]],
      current: ["Where does the user live now?", "Which city is the user based in at the moment?"] }],
  ["flat", "home", 0.7, "The user rents a {0} apartment on the {1} floor.",
    [["two-bedroom", "fourth"], ["small", "ground"], ["one-bedroom", "twelfth"], ["studio", "third"], ["three-bedroom", "second"]],
    [["forms", "renting apartments"], ["paraphrase", "Does the user own a house or pay a landlord?"]],
    { score: 0.9, text: "The user bought a {c0} with a garden.",
      values: [["townhouse"], ["farmhouse"], ["bungalow"], ["machiya"], ["duplex"]],
      current: ["What kind of home does the user have now?"] }],
  ["neighbour", "home", 0.6, "The user's neighbour {0} waters the plants when the user travels.",
    [["Mrs. Lefevre"], ["Don Ernesto"], ["Gary"], ["Mr. Tanaka"], ["Auntie Bisi"]],
    [["forms", "neighbours watering plant"], ["paraphrase", "Who looks after the greenery during trips away?"]]],
  ["balcony", "garden", 0.6, "The user grows {0} on the balcony.",
    [["tomatoes and basil"], ["chili peppers"], ["strawberries"], ["shiso and mint"], ["okra and spinach"]],
    [["exact", "balcony"], ["forms", "growing"], ["paraphrase", "Does the user cultivate anything outdoors?"]]],
  ["internet", "tech", 0.5, "The user's home internet provider is {0}.",
    [["Orange"], ["Movistar"], ["Rogers"], ["NTT"], ["Spectranet"]],
    [["exact", "internet provider"], ["paraphrase", "Which company supplies the wifi at the apartment?"]]],

  ["spouse", "family", 0.9, "The user is married to {0}, who works as a {1}.",
    [["Julien", "sound engineer"], ["Lucia", "midwife"], ["Sam", "architect"], ["Emi", "translator"], ["Kemi", "pharmacist"]],
    [["exact", "{0}"], ["paraphrase", "Who is the user's spouse?"]]],
  ["daughter", "family", 0.9, "The user has a daughter named {0} who is {1} years old.",
    [["Chloe", "7"], ["Ines", "4"], ["Asha", "10"], ["Hana", "6"], ["Tolu", "12"]],
    [["exact", "daughter"], ["forms", "daughters"], ["paraphrase", "What age is the user's little girl?"]]],
  ["son", "family", 0.85, "The user's son {0} plays {1} on Saturdays.",
    [["Leo", "football"], ["Pablo", "basketball"], ["Rohan", "cricket"], ["Sora", "baseball"], ["Dayo", "table tennis"]],
    [["exact", "son {1}"], ["forms", "sons playing"], ["paraphrase", "What sport does the boy practise at the weekend?"]]],
  ["mother", "family", 0.8, "The user's mother lives in {0} and visits every {1}.",
    [["Lyon", "Easter"], ["Seville", "summer"], ["Chennai", "December"], ["Nagoya", "spring"], ["Ibadan", "Christmas"]],
    [["exact", "mother {0}"], ["forms", "mothers visiting"], ["paraphrase", "Where is the user's mum based?"]]],
  ["brother", "family", 0.75, "The user's brother {0} is a {1} in {2}.",
    [["Antoine", "firefighter", "Marseille"], ["Diego", "fisherman", "Cadiz"], ["Vikram", "dentist", "Mumbai"], ["Ryo", "pilot", "Sapporo"], ["Femi", "banker", "London"]],
    [["exact", "brother {0}"], ["partial", "{1:p}"], ["paraphrase", "What does the user's sibling do?"]]],
  ["anniversary", "family", 0.8, "The user's wedding anniversary is on {0}.",
    [["June 14"], ["September 3"], ["May 21"], ["April 9"], ["November 30"]],
    [["exact", "anniversary"], ["partial", "annivers"], ["paraphrase", "When did the user get married?"]]],
  ["father", "family", 0.7, "The user's father {0} is retired and spends his days {1}.",
    [["Michel", "fishing"], ["Manuel", "playing dominoes"], ["Suresh", "reading history books"], ["Hiroshi", "growing bonsai"], ["Tunde", "watching football"]],
    [["exact", "father retired"], ["forms", "retirement fathers"], ["paraphrase", "What keeps the user's dad busy nowadays?"]]],
  ["kids", "family", 0.7, "The user picks up the kids from school at {0} on weekdays.",
    [["4:30 pm"], ["5 pm"], ["3:45 pm"], ["4 pm"], ["3:30 pm"]],
    [["exact", "school"], ["forms", "picking kid"], ["paraphrase", "When does the user collect the children?"]]],

  ["pet", "pets", 0.9, "The user has a {0} named {1}.",
    [["golden retriever", "Biscuit"], ["tabby cat", "Canela"], ["beagle", "Pixel"], ["shiba inu", "Mochi"], ["grey parrot", "Zuzu"]],
    [["exact", "{1}"], ["partial", "{0:p}"], ["paraphrase", "Does the user have a companion animal?"]]],
  ["vet", "health", 0.6, "The user takes {0} to the vet at {1}.",
    [["Biscuit", "Paws and Claws Clinic"], ["Canela", "Veterinaria Sol"], ["Pixel", "Maple Vet Hospital"], ["Mochi", "Sakura Clinic"], ["Zuzu", "Avian Care Centre"]],
    [["exact", "vet"], ["paraphrase", "Where does the user go when the pet is ill?"]]],
  ["allergy", "health", 0.95, "The user is allergic to {0}.",
    [["penicillin"], ["shellfish"], ["peanuts"], ["bee stings"], ["latex"]],
    [["exact", "allergic"], ["forms", "allergy"], ["paraphrase", "What substance makes the user react badly?"]]],
  ["medication", "health", 0.8, "The user takes {0} for {1}.",
    [["levothyroxine", "an underactive thyroid"], ["an inhaler", "asthma"], ["vitamin D", "a deficiency"], ["iron tablets", "anemia"], ["metformin", "type 2 diabetes"]],
    [["exact", "{1}"], ["paraphrase", "Is the user on any medicine?"]]],
  ["sleep", "schedule", 0.7, "The user goes to bed around {0} and wakes at {1}.",
    [["11 pm", "6:30 am"], ["midnight", "7 am"], ["10:30 pm", "6 am"], ["1 am", "5 am"], ["10 pm", "5:30 am"]],
    [["exact", "bed"], ["forms", "waking"], ["paraphrase", "What are the user's sleeping hours?"]],
    { score: 0.7, text: "The user now gets up at {c0} because of a new shift.",
      values: [["5 am"], ["6 am"], ["8 am"], ["4 am"], ["7 am"]],
      current: ["What time does the user wake up now?"] }],
  ["surgery", "health", 0.75, "The user had knee surgery in {0}.",
    [["2019"], ["2021"], ["2018"], ["2020"], ["2022"]],
    [["exact", "knee surgery"], ["partial", "surg"], ["paraphrase", "Has the user ever had an operation?"]]],
  ["doctor", "health", 0.6, "The user's family doctor is Dr. {0}.",
    [["Moreau"], ["Ibarra"], ["Singh"], ["Fujita"], ["Okonkwo"]],
    [["exact", "doctor"], ["paraphrase", "Who is the user's physician?"]]],
  ["yoga", "health", 0.6, "The user does yoga on {0} evenings.",
    [["Tuesday"], ["Thursday"], ["Monday"], ["Wednesday"], ["Sunday"]],
    [["exact", "yoga"], ["paraphrase", "Which stretching class does the user attend?"]]],

  ["cuisine", "food", 0.8, "The user's favourite cuisine is {0} food.",
    [["Ethiopian"], ["Peruvian"], ["Korean"], ["Georgian"], ["Lebanese"]],
    [["exact", "cuisine"], ["partial", "{0:p}"], ["paraphrase", "What kind of meals does the user enjoy most?"]]],
  ["diet", "food", 0.85, "The user follows a {0} diet.",
    [["vegetarian"], ["vegan"], ["pescatarian"], ["keto"], ["low-sodium"]],
    [["exact", "{0} diet", { withCorrection: true }]],
    { score: 0.85, text: "The user gave up the {0} diet and now eats {c0}.",
      values: [["fish on weekends"], ["cheese again"], ["chicken occasionally"], ["rice and bread again"], ["salty snacks sometimes"]],
      current: ["What does the user eat these days?"] }],
  ["drink", "food", 0.7, "The user drinks {0} every morning.",
    [["an oat milk flat white"], ["a cortado"], ["a matcha latte"], ["hojicha tea"], ["black coffee with ginger"]],
    [["exact", "{0}"], ["forms", "drinking mornings"], ["paraphrase", "What beverage starts the user's day?"]]],
  ["dislike", "food", 0.7, "The user cannot stand {0}.",
    [["cilantro"], ["olives"], ["mushrooms"], ["natto"], ["mayonnaise"]],
    [["exact", "{0}"], ["paraphrase", "Which ingredient does the user hate?"]]],
  ["restaurant", "food", 0.6, "The user's go-to restaurant is {0}.",
    [["Zincbar Bistro"], ["Montana Grill"], ["Seoulful Kitchen"], ["Tsukimi Ramen"], ["Suya Spot"]],
    [["exact", "restaurant"], ["partial", "{0:p}"], ["paraphrase", "Where does the user like to eat out?"]]],
  ["baking", "food", 0.75, "The user bakes {0} every Sunday.",
    [["sourdough bread"], ["banana cake"], ["focaccia"], ["melon pan"], ["puff-puff"]],
    [["exact", "{0}"], ["forms", "baking sundays"], ["paraphrase", "What does the user make in the oven at the end of the week?"]]],

  ["running", "sport", 0.85, "The user runs {0} kilometres three times a week.",
    [["5"], ["8"], ["10"], ["6"], ["12"]],
    [["forms", "running kilometre"], ["paraphrase", "How much jogging does the user do?"]],
    { score: 0.8, text: "The user stopped running after a {c0} injury and swims instead.",
      values: [["knee"], ["ankle"], ["hip"], ["back"], ["hamstring"]],
      current: ["Does the user still run?"] }],
  ["band", "music", 0.8, "The user plays the {0} in a {1} band.",
    [["cello", "chamber"], ["guitar", "flamenco"], ["drums", "indie"], ["saxophone", "jazz"], ["bass guitar", "afrobeat"]],
    [["exact", "{0}"], ["forms", "bands playing"], ["paraphrase", "Which instrument can the user perform on?"]]],
  ["author", "books", 0.7, "The user's favourite author is {0}.",
    [["Annie Ernaux"], ["Almudena Grandes"], ["Arundhati Roy"], ["Haruki Murakami"], ["Chinua Achebe"]],
    [["exact", "{0}"], ["partial", "{0:p}"], ["paraphrase", "Whose novels does the user like reading?"]]],
  ["hiking", "outdoors", 0.7, "The user goes hiking in {0} once a month.",
    [["the Vosges"], ["Sierra Nevada"], ["Algonquin Park"], ["the Rokkosan trails"], ["the Idanre Hills"]],
    [["exact", "hiking"], ["forms", "hikes"], ["partial", "{0:p}"], ["paraphrase", "Where does the user trek in nature?"]]],
  ["collection", "hobby", 0.6, "The user collects {0}.",
    [["vintage postcards"], ["vinyl records"], ["fountain pens"], ["Gundam models"], ["antique coins"]],
    [["exact", "{0}"], ["forms", "collecting"], ["paraphrase", "What does the user hoard as a pastime?"]]],
  ["marathon", "sport", 0.8, "The user is training for the {0} marathon in {1}.",
    [["Berlin", "September"], ["Valencia", "December"], ["Chicago", "October"], ["Tokyo", "March"], ["Lagos", "February"]],
    [["exact", "marathon"], ["forms", "marathons trained"], ["partial", "marat"], ["paraphrase", "Which long-distance race is coming up?"]]],
  ["team", "sport", 0.6, "The user supports {0}.",
    [["Paris Saint-Germain"], ["Valencia CF"], ["the Toronto Raptors"], ["the Hanshin Tigers"], ["Arsenal"]],
    [["exact", "{0}"], ["paraphrase", "Which club is the user a fan of?"]]],
  ["games", "hobby", 0.5, "The user plays {0} online most nights.",
    [["chess"], ["chess"], ["go"], ["shogi"], ["scrabble"]],
    [["exact", "online {0}"], ["forms", "playing night"], ["paraphrase", "Which board game does the user enjoy on the internet?"]]],
  ["bookclub", "books", 0.6, "The user is in a book club that meets monthly at {0}.",
    [["the library"], ["a wine bar"], ["a cafe downtown"], ["a tea house"], ["the community hall"]],
    [["exact", "book club"], ["forms", "clubs meeting"], ["paraphrase", "Does the user discuss novels with a group?"]]],

  ["trip", "travel", 0.75, "The user is planning a trip to {0} in {1}.",
    [["Iceland", "August"], ["Morocco", "April"], ["Japan", "May"], ["Portugal", "July"], ["Kenya", "January"]],
    [["exact", "{0}", { withCorrection: true }], ["forms", "plans trips"], ["paraphrase", "Where is the user going on holiday?"]],
    { score: 0.6, text: "The user cancelled the {0} trip and will visit {c0} instead.",
      values: [["Norway"], ["Egypt"], ["Vietnam"], ["Greece"], ["Ghana"]],
      current: ["Where is the user travelling this year?"] }],
  ["seat", "travel", 0.6, "The user prefers {0} seats on flights.",
    [["window"], ["aisle"], ["window"], ["aisle"], ["exit row"]],
    [["forms", "flight seat"], ["paraphrase", "Where does the user like to sit on a plane?"]]],
  ["passport", "admin", 0.8, "The user's passport expires in {0}.",
    [["March 2027"], ["October 2026"], ["June 2028"], ["January 2027"], ["August 2026"]],
    [["exact", "passport"], ["partial", "passp"], ["paraphrase", "When must the user renew identity papers?"]]],
  ["hometown", "personal", 0.85, "The user grew up in {0}.",
    [["Rouen"], ["Zaragoza"], ["Pune"], ["Kobe"], ["Ibadan"]],
    [["exact", "{0}"], ["forms", "grow up"], ["paraphrase", "What is the user's place of birth?"]]],
  ["languages", "languages", 0.85, "The user speaks {0} and {1}.",
    [["French", "English"], ["Spanish", "Catalan"], ["Tamil", "English"], ["Japanese", "English"], ["Yoruba", "English"]],
    [["exact", "{0}"], ["forms", "speaking"], ["paraphrase", "Which tongues is the user fluent in?"]]],

  ["saving", "money", 0.7, "The user is saving money for {0}.",
    [["a sailing boat"], ["a van conversion"], ["a house deposit"], ["a bakery of their own"], ["a new laboratory kit"]],
    [["exact", "saving money"], ["forms", "saves"], ["paraphrase", "What financial goal does the user have?"]]],
  ["bank", "money", 0.5, "The user banks with {0}.",
    [["Credit Agricole"], ["Santander"], ["Tangerine"], ["Mizuho"], ["Zenith Bank"]],
    [["exact", "{0}"], ["paraphrase", "Where does the user hold an account?"]]],
  ["colour", "personal", 0.5, "The user's favourite colour is {0}.",
    [["teal"], ["ochre"], ["lavender"], ["forest green"], ["orange"]],
    [["exact", "colour"], ["forms", "colours"], ["paraphrase", "Which hue does the user like best?"]]],
  ["answers", "preferences", 0.8, "The user prefers {0} answers.",
    [["short"], ["detailed"], ["bullet-point"], ["short"], ["step-by-step"]],
    [["exact", "answers"], ["paraphrase", "How should the assistant reply?"]]],
  ["reminders", "preferences", 0.7, "The user wants reminders sent by {0}.",
    [["email"], ["text message"], ["Slack"], ["LINE"], ["WhatsApp"]],
    [["exact", "reminders"], ["forms", "reminder"], ["paraphrase", "How should notifications reach the user?"]]],
  ["calls", "preferences", 0.6, "The user dislikes phone calls before {0}.",
    [["10 am"], ["9 am"], ["11 am"], ["8 am"], ["9:30 am"]],
    [["exact", "phone calls"], ["forms", "calling"], ["paraphrase", "When is it too early to ring?"]]],
  ["birthday", "personal", 0.9, "The user's birthday is {0}.",
    [["March 3"], ["July 19"], ["January 27"], ["October 8"], ["December 1"]],
    [["exact", "birthday"], ["partial", "birth"], ["paraphrase", "When was the user born?"]]],
  ["fear", "personal", 0.6, "The user is afraid of {0}.",
    [["heights"], ["deep water"], ["spiders"], ["thunder"], ["snakes"]],
    [["exact", "{0}"], ["paraphrase", "What scares the user?"]]],
  ["volunteer", "community", 0.7, "The user volunteers at {0} on Saturdays.",
    [["a food bank"], ["an animal shelter"], ["a coding club"], ["a soup kitchen"], ["a youth choir"]],
    [["forms", "volunteering saturday"], ["paraphrase", "Where does the user help out for free?"]]],
  ["car", "transport", 0.8, "The user drives a {0}.",
    [["Renault Zoe"], ["Seat Ibiza"], ["Honda Civic"], ["Toyota Prius"], ["Toyota Corolla"]],
    [["exact", "{0}", { withCorrection: true }]],
    { score: 0.8, text: "The user sold the {0} and bought a {c0}.",
      values: [["Volkswagen ID.3"], ["Kia Niro"], ["Tesla Model 3"], ["Nissan Leaf"], ["Hyundai Kona"]],
      current: ["What car does the user drive now?"] }],
  ["phone", "tech", 0.6, "The user's phone is an {0}.",
    [["iPhone 13"], ["Samsung Galaxy S22"], ["Pixel 8"], ["iPhone 15"], ["Tecno Camon"]],
    [["exact", "phone", { withCorrection: true }], ["paraphrase", "What mobile device does the user carry?"]],
    { score: 0.7, text: "The user switched to a {c0} phone.",
      values: [["Fairphone"], ["Xiaomi"], ["Nothing"], ["Sony Xperia"], ["Samsung"]],
      current: ["Which phone does the user use now?"] }],
  ["bestfriend", "friends", 0.75, "The user's best friend is {0}, who lives in {1}.",
    [["Camille", "Bordeaux"], ["Rafa", "Bilbao"], ["Meera", "Montreal"], ["Yuki", "Sendai"], ["Chidi", "Abuja"]],
    [["exact", "{0}"], ["partial", "{1:p}"], ["paraphrase", "Who is the user's closest mate?"]]],
  ["tool", "tools", 0.6, "The user's favourite tool is {0}.",
    [["a Littmann stethoscope"], ["a Japanese pull saw"], ["Vim"], ["an offset spatula"], ["a digital pH meter"]],
    [["forms", "tooling"], ["paraphrase", "Which piece of equipment does the user love?"]]],
  ["passwords", "tech", 0.6, "The user keeps passwords in {0}.",
    [["Bitwarden"], ["1Password"], ["KeePassXC"], ["Bitwarden"], ["LastPass"]],
    [["exact", "passwords"], ["partial", "{0:p}"], ["paraphrase", "How does the user store login credentials?"]]],
];

const fill = (s, vals, cvals = []) =>
  s.replace(/\{(c?)(\d+)(:p)?\}/g, (_, c, i, p) => {
    const v = (c ? cvals : vals)[Number(i)];
    if (v === undefined) throw new Error(`corpus: no value for {${c}${i}} in ${JSON.stringify(s)}`);
    if (!p) return v;
    const longest = v.split(/[^\p{L}\p{N}]+/u).reduce((a, b) => (b.length > a.length ? b : a), "");
    return longest.slice(0, Math.min(longest.length - 1, Math.max(4, Math.ceil(longest.length * 0.6))));
  });

/**
 * The corpus: per user `{agent, facts: [{id, content, tags, score, later}], queries: [{kind, q,
 * relevant: [ids], outdated?, relation?}]}`; `later` facts (corrections) are stored after the others.
 */
export function buildCorpus() {
  return USERS.map((user, u) => {
    const facts = [];
    const queries = [];
    const later = [];
    for (const [key, tag, score, text, values, qs, corr] of T) {
      const vals = values[u];
      const id = `${user}.${key}`;
      facts.push({ id, content: fill(text, vals), tags: [tag], score });
      let cid = null;
      if (corr) {
        cid = `${id}.now`;
        later.push({ id: cid, content: fill(corr.text, vals, corr.values[u]), tags: [corr.tag ?? tag], score: corr.score, later: true });
        const relation = corr.score < score ? "lower" : corr.score === score ? "equal" : "higher";
        for (const q of corr.current) queries.push({ kind: "current", q, relevant: [cid], outdated: id, relation });
      }
      for (const [kind, q, opt] of qs) {
        queries.push({ kind, q: fill(q, vals), relevant: opt?.withCorrection && cid ? [id, cid] : [id] });
      }
    }
    return { agent: user, facts: [...facts, ...later], queries };
  });
}

// ── Checks of the query kinds' lexical constraints ──────────────────────────────────────────────

// The recall's stop words (crates/core/src/memory/recall.rs) and a few more function words.
const STOP = new Set(("a about all am an and any are as at be been but by can could did do does doing for from had has have he " +
  "her him his how i if in into is it its me my now of on or our she should so some than that the their them then there " +
  "these they this those to too up us was we were what when where which who whom why will with would you your user user's " +
  "users s get go most still").split(" "));
const words = (t) => (t.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((w) => !STOP.has(w));
const prefixLen = (a, b) => { let i = 0; while (i < a.length && i < b.length && a[i] === b[i]) i++; return i; };
/** Same word up to an ending (a crude stand-in for stemming): "live"/"lives", "day"/"days", "garden"/"gardening". */
const sameStem = (a, b) => { const p = prefixLen(a, b); return a === b || (p >= 3 && p >= Math.min(a.length, b.length) - 1) || p >= 5; };

/** Problems of the corpus (query kinds whose words break their kind's rule), as strings. */
export function checkCorpus(corpus) {
  const problems = [];
  for (const { agent, facts, queries } of corpus) {
    const byId = new Map(facts.map((f) => [f.id, f]));
    for (const q of queries) {
      const rel = q.relevant.map((id) => byId.get(id));
      if (rel.some((f) => !f)) { problems.push(`${agent}: ${q.kind} ${JSON.stringify(q.q)}: unknown relevant id`); continue; }
      const fw = new Set(rel.flatMap((f) => words(`${f.content} ${f.tags.join(" ")}`)));
      const qw = words(q.q);
      const exact = qw.filter((w) => fw.has(w));
      const stem = qw.filter((w) => [...fw].some((f) => sameStem(w, f)));
      const say = (why) => problems.push(`${agent}: ${q.kind} ${JSON.stringify(q.q)} → ${rel.map((f) => JSON.stringify(f.content)).join(", ")}: ${why}`);
      if (q.kind === "exact" && exact.length === 0) say("no word of the fact");
      if (q.kind === "forms" && exact.length) say(`shares ${exact.join(", ")}`);
      if (q.kind === "paraphrase" && stem.length) say(`shares ${stem.join(", ")}`);
      if (q.kind === "partial") {
        if (exact.length) say(`shares ${exact.join(", ")}`);
        if (!qw.every((w) => [...fw].some((f) => f.startsWith(w) && f !== w))) say("not a prefix of a word of the fact");
      }
    }
  }
  return problems;
}
