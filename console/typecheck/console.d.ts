// Types the console's modules share, beyond the GraphQL API's own
// (graphql.d.ts, generated) and uPlot's (uplot.d.ts).

declare namespace GQL {
  /**
   * A query's or mutation's data: what request() in graphql.js resolves to.
   * The console reads only root fields it selected, so it is typed as every
   * root field at once; each is as nullable as the schema says.
   */
  type Data = Query & Mutation;
}

/**
 * A child that h, append and replace (dom.js) take: a node, text (a number
 * shows as text), nothing (null, undefined, false), or an array of them.
 */
type DomChild = Node | string | number | boolean | null | undefined | DomChild[];

/** The signed-in account as session.js keeps it (the answer of me, or of a sign-in). */
type SignedIn = Pick<GQL.Account, 'id' | 'name' | 'member'>;

/** What a page function (homePage, historyPage…) returns to the router in app.js. */
interface Page {
  dispose?(): void;
}

/** navigate (app.js) moves to a console path without reloading. */
type Navigate = (path: string) => void;
